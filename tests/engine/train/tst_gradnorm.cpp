// The clipping norm a one-replica step reports is the norm of the gradients the step leaves behind, when
// the trainer takes its squares in the backward (a block's weight matrices right after their products,
// the rest at the block's end) and some micro-batches only add a share (gradient accumulation): squares
// taken before a gradient is final would differ. Run: mpirun -np 1 tst_gradnorm
#include "engine/plan/LayoutParser.h"
#include "engine/profiles/BuiltinProfiles.h"
#include "engine/train/CpuKernels.h"
#include "engine/train/Trainer.h"
#include "tests/engine/comm/MpiTest.h"

#include <cmath>
#include <string>

using namespace loom;

class TestGradNorm : public QObject {
    Q_OBJECT
private slots:
    void normOfTheFinalGradients_data()
    {
        QTest::addColumn<QString>("model");
        QTest::newRow("gpt-tiny") << "gpt-tiny";
        QTest::newRow("llama-tiny") << "llama-tiny";
    }

    void normOfTheFinalGradients()
    {
        QFETCH(QString, model);
        // Four micro-batches of 2 per step: three add a share before the last one completes each gradient.
        const std::string text = "{\"loom_layout\": 1, \"name\": \"gradnorm\", \"model\": \"" + model.toStdString()
            + "\", \"cluster\": \"local\", \"parallel\": {\"tp\": 1, \"pp\": 1, \"dp\": 1, \"micro_batch\": 2, "
              "\"global_batch\": 8}}";
        const auto read = plan::readLayout(text, profiles::BuiltinProfiles::instance());
        QVERIFY2(read.ok(), read.diagnostics.format().c_str());
        auto comms = comm::makeMpiGridCommunicators(plan::RankGrid::forLayout(*read.layout), nullptr);
        const train::Corpus corpus = train::Corpus::synthetic(1);
        train::CpuKernels kernels;
        train::TrainOptions options;
        options.steps = 3;
        train::Trainer trainer(*read.layout, comms, corpus, options, kernels);
        for (std::int64_t s = 0; s < options.steps; ++s) {
            const train::StepResult r = trainer.step(s);
            QVERIFY2(r.normInBackward > 0, "the squares were not taken in the backward");
            double squares = 0;
            for (float g : trainer.stage().params().grads)
                squares += double(g) * double(g);
            const double norm = std::sqrt(squares);
            QVERIFY2(norm > 0 && std::abs(r.gradNorm - norm) <= 1e-9 * norm,
                qPrintable(QStringLiteral("step %1: reported %2, the gradients' norm %3")
                               .arg(s)
                               .arg(r.gradNorm, 0, 'g', 17)
                               .arg(norm, 0, 'g', 17)));
        }
    }
};

int main(int argc, char** argv)
{
    return comm::testing::runOnEveryRank<TestGradNorm>(argc, argv);
}
#include "tst_gradnorm.moc"
