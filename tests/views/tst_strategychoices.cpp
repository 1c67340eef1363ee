// The strategy panel's enumerated choices come from the plan's enums (engine/plan/Choices.h): each box
// lists exactly the layout file's words, choosing an item edits the layout to that value, the value
// survives a layout file, and showing a layout selects its value.

#include "ViewsTest.h"
#include "engine/plan/Choices.h"
#include "engine/plan/LayoutParser.h"
#include "views/StrategyPanel.h"

#include <QComboBox>

#include <functional>

using namespace loom;
using namespace loom::views;

namespace {

// One enumerated choice: its box's object name, the words the plan gives, how to read it from a layout.
struct Choice {
    QStringList words;
    std::function<int(const plan::Layout&)> get;
};

template <typename Enum, std::size_t N> QStringList wordsOf(const std::array<Enum, N>& values)
{
    QStringList out;
    for (Enum v : values) {
        using plan::toString;
        out << QString::fromLatin1(toString(v).data(), qsizetype(toString(v).size()));
    }
    return out;
}

int codecKind(const plan::Layout& l)
{
    return int(l.comm.dpCodec.kind);
}

} // namespace

Q_DECLARE_METATYPE(Choice)

class TestStrategyChoices : public QObject {
    Q_OBJECT
private slots:
    void choices_data()
    {
        QTest::addColumn<QString>("box");
        QTest::addColumn<Choice>("choice");
        QTest::newRow("schedule") << "schedule"
                                  << Choice { wordsOf(plan::allScheduleKinds()),
                                         [](const plan::Layout& l) { return int(l.parallel.schedule); } };
        QTest::newRow("rank order") << "order" << Choice { wordsOf(plan::allRankOrders()), [](const plan::Layout& l) {
                                                              return int(l.parallel.order);
                                                          } };
        QTest::newRow("recompute") << "recompute"
                                   << Choice { wordsOf(plan::allRecomputes()),
                                          [](const plan::Layout& l) { return int(l.memory.recompute); } };
        QTest::newRow("precision") << "precision"
                                   << Choice { wordsOf(plan::allPrecisions()),
                                          [](const plan::Layout& l) { return int(l.precision); } };
        QTest::newRow("codec") << "codec" << Choice { wordsOf(plan::allCodecKinds()), codecKind };
        QTest::newRow("all-reduce") << "allreduce"
                                    << Choice { wordsOf(plan::allAllreduceAlgorithms()),
                                           [](const plan::Layout& l) { return int(l.comm.allreduce); } };
    }

    void choices()
    {
        QFETCH(QString, box);
        QFETCH(Choice, choice);
        StrategyPanel panel(&profiles::BuiltinProfiles::instance());
        plan::Layout start = test::tinyLayout();
        panel.setLayout(start);
        auto* combo = panel.findChild<QComboBox*>(box);
        QVERIFY(combo);
        QStringList shown;
        for (int i = 0; i < combo->count(); ++i)
            shown << combo->itemText(i);
        QCOMPARE(shown, choice.words); // exactly the plan's values, in its order
        QCOMPARE(combo->currentIndex(), combo->findData(choice.get(start)));

        QSignalSpy edits(&panel, &StrategyPanel::editRequested);
        for (int i = 0; i < combo->count(); ++i) {
            panel.setLayout(start);
            edits.clear();
            combo->setCurrentIndex(i);
            emit combo->activated(i);
            const int value = combo->itemData(i).toInt();
            if (value == choice.get(start)) {
                QCOMPARE(edits.count(), 0); // choosing the current value is no edit
                continue;
            }
            QVERIFY2(edits.count() == 1, qPrintable(choice.words[i]));
            const auto next = edits.at(0).at(0).value<plan::Layout>();
            QCOMPARE(choice.get(next), value);
            // The value is the file format's: it survives writing and reading the layout.
            const auto read = plan::readLayout(plan::writeLayout(next), profiles::BuiltinProfiles::instance());
            QVERIFY2(read.layout, read.diagnostics.format().c_str());
            QCOMPARE(choice.get(*read.layout), value);
            // Showing the edited layout selects the chosen item.
            panel.setLayout(next);
            QCOMPARE(combo->currentIndex(), i);
        }
    }
};

QTEST_MAIN(TestStrategyChoices)
#include "tst_strategychoices.moc"
