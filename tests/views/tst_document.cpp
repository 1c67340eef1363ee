// LayoutDocument: undo and redo restore layouts exactly; files round-trip; bad files are refused clearly.

#include "ViewsTest.h"
#include "engine/plan/LayoutParser.h"
#include "views/LayoutDocument.h"
#include "views/LayoutEdits.h"

#include <QTemporaryDir>
#include <QUndoStack>

using namespace loom;
using namespace loom::views;

class TestDocument : public QObject {
    Q_OBJECT
private slots:
    void undoRedoRestoreExactly()
    {
        LayoutDocument doc;
        const plan::Layout start = test::megatron1t();
        doc.reset(start);
        QVERIFY(!doc.isModified());
        QSignalSpy changed(&doc, &LayoutDocument::layoutChanged);

        std::vector<plan::Layout> history { start };
        auto push = [&](const plan::Layout& next, const char* text) {
            doc.edit(next, QString::fromLatin1(text));
            history.push_back(next);
            QCOMPARE(doc.layout(), next);
        };
        push(*withDegree(doc.layout(), Degree::Tp, 4).layout, "tp 4");
        push(*dropBlocksOnRank(doc.layout(), 4, 10, 12).layout, "drop");
        plan::Layout z = doc.layout();
        z.memory.zero = 1;
        z.comm.dpCodec = *plan::Codec::parse("topk:0.01");
        push(z, "zero and codec");
        QCOMPARE(doc.undoStack()->count(), 3);
        QVERIFY(doc.isModified());

        for (int i = int(history.size()) - 2; i >= 0; --i) {
            doc.undoStack()->undo();
            QCOMPARE(doc.layout(), history[std::size_t(i)]);
        }
        QVERIFY(!doc.isModified());
        for (std::size_t i = 1; i < history.size(); ++i) {
            doc.undoStack()->redo();
            QCOMPARE(doc.layout(), history[i]);
        }
        QCOMPARE(changed.count(), 3 + 3 + 3);
        // An edit that changes nothing is not an undo step.
        doc.edit(doc.layout(), QStringLiteral("nothing"));
        QCOMPARE(doc.undoStack()->count(), 3);
    }

    void stepsOfOneControlMerge()
    {
        LayoutDocument doc;
        const plan::Layout start = test::tinyLayout();
        doc.reset(start);
        plan::Layout l = start;
        for (int b : { 32, 48, 64 }) {
            l.parallel.globalBatch = b;
            doc.edit(l, QStringLiteral("batch %1").arg(b), 7);
        }
        QCOMPARE(doc.undoStack()->count(), 1);
        QCOMPARE(doc.undoStack()->undoText(), QStringLiteral("batch 64"));
        doc.undoStack()->undo();
        QCOMPARE(doc.layout(), start);
    }

    void saveAndReopenIsIdentical()
    {
        QTemporaryDir dir;
        LayoutDocument doc;
        const profiles::BuiltinProfiles& profiles = profiles::BuiltinProfiles::instance();
        QString error;
        QVERIFY2(doc.open(QStringLiteral(LOOM_SOURCE_DIR "/resources/examples/megatron-1t-3072-a100.json"), profiles,
                     &error),
            qPrintable(error));
        const EditResult dropped = dropBlocksOnRank(doc.layout(), 8, 2, 4);
        QVERIFY2(dropped.ok(), dropped.refusal.c_str());
        doc.edit(*dropped.layout, QStringLiteral("drop"));
        const QString path = dir.filePath(QStringLiteral("edited.json"));
        QVERIFY2(doc.save(path, &error), qPrintable(error));
        QVERIFY(!doc.isModified());
        QCOMPARE(doc.filePath(), path);
        QCOMPARE(doc.displayName(), QStringLiteral("edited.json"));

        LayoutDocument again;
        QVERIFY2(again.open(path, profiles, &error), qPrintable(error));
        QCOMPARE(again.layout(), doc.layout());
        QVERIFY(again.readDiagnostics().empty());
        // The bytes are stable too: saving the reopened layout writes the same file.
        const QString second = dir.filePath(QStringLiteral("second.json"));
        QVERIFY(again.save(second, &error));
        QFile a(path), b(second);
        QVERIFY(a.open(QIODevice::ReadOnly) && b.open(QIODevice::ReadOnly));
        QCOMPARE(a.readAll(), b.readAll());
    }

    void badFilesAreRefusedWithTheReason()
    {
        QTemporaryDir dir;
        LayoutDocument doc;
        doc.reset(test::tinyLayout());
        const auto& profiles = profiles::BuiltinProfiles::instance();
        QString error;
        QVERIFY(!doc.open(dir.filePath(QStringLiteral("missing.json")), profiles, &error));
        QVERIFY2(error.contains(QStringLiteral("Cannot open")), qPrintable(error));
        QFile garbage(dir.filePath(QStringLiteral("garbage.json")));
        QVERIFY(garbage.open(QIODevice::WriteOnly));
        garbage.write("{ this is not json");
        garbage.close();
        QVERIFY(!doc.open(garbage.fileName(), profiles, &error));
        QVERIFY2(error.contains(QStringLiteral("not a layout")), qPrintable(error));
        QCOMPARE(doc.layout(), test::tinyLayout()); // the current layout stays

        // A layout with a semantic error opens, so the user can fix it, and says what is wrong.
        QFile invalid(dir.filePath(QStringLiteral("invalid.json")));
        QVERIFY(invalid.open(QIODevice::WriteOnly));
        std::string text = plan::writeLayout(test::tinyLayout());
        text.replace(text.find("\"tp\": 2"), 7, "\"tp\": 3");
        invalid.write(text.data(), qint64(text.size()));
        invalid.close();
        QVERIFY2(doc.open(invalid.fileName(), profiles, &error), qPrintable(error));
        QCOMPARE(doc.layout().parallel.tp, 3);
        QVERIFY(!doc.readDiagnostics().errors().empty());

        QVERIFY(!doc.save(dir.filePath(QStringLiteral("no/such/folder/x.json")), &error));
        QVERIFY2(error.contains(QStringLiteral("Cannot save")), qPrintable(error));
    }
};

QTEST_GUILESS_MAIN(TestDocument)
#include "tst_document.moc"
