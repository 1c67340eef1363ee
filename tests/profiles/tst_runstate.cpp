// RunState at the store's boundary: each state is stored as its word (the text the schema's CHECK and
// `loom runs list` use) and read back as the same enum value.
#include "profiles/RunStore.h"

#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

using namespace loom::profiles;

Q_DECLARE_METATYPE(loom::profiles::RunState)

class TestRunState : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

private slots:
    void words_data()
    {
        QTest::addColumn<RunState>("state");
        QTest::addColumn<QString>("word");
        QTest::addColumn<bool>("bad");
        QTest::newRow("running") << RunState::Running << "running" << false;
        QTest::newRow("finished") << RunState::Finished << "finished" << false;
        QTest::newRow("failed") << RunState::Failed << "failed" << true;
        QTest::newRow("cancelled") << RunState::Cancelled << "cancelled" << false;
        QTest::newRow("interrupted") << RunState::Interrupted << "interrupted" << true;
    }

    void words()
    {
        QFETCH(RunState, state);
        QFETCH(QString, word);
        QFETCH(bool, bad);
        QCOMPARE(toString(state), word);
        QVERIFY(runStateFromString(word) == state);
        QCOMPARE(endedBadly(state), bad);
        QCOMPARE(isOver(state), state != RunState::Running);

        Store store(m_dir.filePath(QStringLiteral("loom.db")));
        RunStore runs(store);
        const qint64 id = runs.startRun(
            QStringLiteral("r"), QStringLiteral("{}"), QStringLiteral("local"), QStringLiteral("mpirun"));
        QCOMPARE(toString(runs.run(id)->state), QStringLiteral("running"));
        if (state != RunState::Running)
            runs.finishRun(id, state, QStringLiteral("because"));
        QCOMPARE(toString(runs.run(id)->state), word);
        // The database holds the word itself.
        QSqlQuery q(QSqlDatabase::database(store.connectionName()));
        QVERIFY(q.exec(QStringLiteral("SELECT state FROM runs WHERE id = %1").arg(id)) && q.next());
        QCOMPARE(q.value(0).toString(), word);
    }

    void unknownWords()
    {
        QVERIFY(!runStateFromString(u"completed"));
        QVERIFY(!runStateFromString(u"Finished"));
        QVERIFY(!runStateFromString(u""));
    }
};

QTEST_GUILESS_MAIN(TestRunState)
#include "tst_runstate.moc"
