// Lossy gradient codecs keep every copy of a parameter identical: after a few steps of gpt-tiny on 8 ranks
// (tp 2, pp 2, dp 2), TP-replicated tensors are bit-identical across the TP group, the tied token embedding
// across the first and last pipeline stage, and every tensor across the DP group. A codec's result depends
// on the whole bucket (top-k's selection, int8's block scales), so these copies need buckets of their own
// (GradientSync's groups). Run: mpirun -np 8 tst_replicas
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include <cstring>
#include <string>

using namespace loom;

namespace {

// Whether `n` floats are bit-identical on every member of `group`.
bool sameEverywhere(comm::Communicator& group, const float* data, std::size_t n)
{
    std::vector<float> all(n * static_cast<std::size_t>(group.size()));
    group.allGather(data, all.data(), n, comm::DType::F32)->wait();
    for (int r = 1; r < group.size(); ++r)
        if (std::memcmp(all.data(), all.data() + n * static_cast<std::size_t>(r), n * sizeof(float)) != 0)
            return false;
    return true;
}

} // namespace

class TestReplicas : public QObject {
    Q_OBJECT
private slots:
    void copiesStayIdentical_data()
    {
        QTest::addColumn<QString>("codec");
        QTest::newRow("topk:0.01 with feedback") << "topk:0.01";
        QTest::newRow("int8 with feedback") << "int8";
    }

    void copiesStayIdentical()
    {
        QFETCH(QString, codec);
        const std::string text
            = "{\"loom_layout\": 1, \"name\": \"replicas\", \"model\": \"gpt-tiny\", \"cluster\": \"local\", "
              "\"parallel\": {\"tp\": 2, \"pp\": 2, \"dp\": 2, \"micro_batch\": 2, \"global_batch\": 8}, "
              "\"comm\": {\"dp_codec\": \""
            + codec.toStdString() + "\", \"error_feedback\": true, \"codec_warmup\": 2}}";
        const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
        QVERIFY2(read.ok(), read.diagnostics.format().c_str());
        QCOMPARE(comm::testing::worldSize(), 8);
        const train::Corpus corpus = train::Corpus::synthetic(1);
        auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), nullptr);
        train::CpuKernels kernels;
        train::TrainOptions options;
        options.steps = 8;
        train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
        for (std::int64_t s = 0; s < options.steps; ++s)
            trainer.step(s);

        train::ParamSet& params = trainer.stage().params();
        const int wte = trainer.stage().tokenEmbedding();
        int checked = 0;
        for (int i = 0; i < static_cast<int>(params.specs().size()); ++i) {
            const auto& spec = params.spec(i);
            QVERIFY2(sameEverywhere(*comms.data, params.value(i), spec.size()),
                qPrintable(QString::fromStdString(spec.name) + " differs across the DP group"));
            if (spec.shard == train::Shard::Replicated) {
                QVERIFY2(sameEverywhere(*comms.tensor, params.value(i), spec.size()),
                    qPrintable(QString::fromStdString(spec.name) + " differs across the TP group"));
                ++checked;
            }
        }
        QVERIFY(checked > 0);
        // The tied embedding: the first and the last stage each hold it (the middle of pp 2 is empty).
        QVERIFY(wte >= 0);
        QVERIFY2(sameEverywhere(*comms.pipeline, params.value(wte), params.spec(wte).size()),
            "the tied token embedding differs between the first and the last pipeline stage");
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestReplicas>(argc, argv);
}
#include "tst_replicas.moc"
