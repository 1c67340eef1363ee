// Layout search: every result is valid and fits, results are ranked, and the first beats the second for a
// stated reason. (Its speed is measured by `loom plan search` itself, not asserted here.)
#include "engine/plan/LayoutValidator.h"
#include "engine/plan/Search.h"
#include "profiles/BuiltinProfiles.h"

#include <QTest>

using namespace loom::plan;
using loom::profiles::BuiltinProfiles;

class TestSearch : public QObject {
    Q_OBJECT
private slots:
    void megatron1tOn384Nodes()
    {
        SearchRequest r;
        r.model = *BuiltinProfiles::instance().findModel("megatron-1t");
        r.cluster = *BuiltinProfiles::instance().findCluster("dgx-a100");
        r.nodes = 384;
        r.globalBatch = 3072;
        r.precision = Precision::Fp16;
        r.top = 5;
        const SearchResult s = search(r);
        QVERIFY(s.evaluated > 1000);
        QVERIFY(s.fitting > 0);
        QCOMPARE(int(s.ranked.size()), 5);
        for (std::size_t i = 0; i < s.ranked.size(); ++i) {
            const auto& c = s.ranked[i];
            const Diagnostics d = validateLayout(c.layout);
            QVERIFY2(!d.hasErrors(), d.format().c_str());
            QVERIFY(c.prediction.fits);
            QCOMPARE(c.layout.parallel.worldSize(), 3072);
            if (i > 0)
                QVERIFY(s.ranked[i - 1].prediction.tokensPerSecond >= c.prediction.tokensPerSecond);
        }
        QVERIFY(
            s.why.find("faster than") != std::string::npos && s.why.find("mainly because its") != std::string::npos);
        // The published layout (tp 8, pp 64) is among what was considered, and the winner is no slower.
        QVERIFY(s.ranked.front().prediction.tflopsPerGpu >= 150);
    }

    void impossibleRequests()
    {
        SearchRequest r;
        r.model = *BuiltinProfiles::instance().findModel("gpt3-175b");
        r.cluster = *BuiltinProfiles::instance().findCluster("dgx-a100");
        r.nodes = 1;
        r.globalBatch = 8;
        const SearchResult s = search(r);
        QVERIFY(s.ranked.empty()); // 175B cannot fit on 8 GPUs
        QVERIFY(s.evaluated > 0);
        r.cluster = *BuiltinProfiles::instance().findCluster("local");
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, search(r));
    }
};

QTEST_GUILESS_MAIN(TestSearch)
#include "tst_search.moc"
