// Library exceptions in Loom's words (PlainWhat.h): what loom and loom-train print for an exception that
// Loom's code did not word itself, instead of "std::bad_alloc" or "filesystem error: cannot rename: ...".
#include "engine/trace/PlainWhat.h"

#include <nlohmann/json.hpp>

#include <QTest>

#include <system_error>

class TestPlainWhat : public QObject {
    Q_OBJECT
private slots:
    void outOfMemory()
    {
        QCOMPARE(QString::fromStdString(loom::plainWhat(std::bad_alloc(), "out of memory: less, please")),
            QStringLiteral("out of memory: less, please"));
        QVERIFY(!QString::fromStdString(loom::plainWhat(std::bad_alloc())).contains(QLatin1String("bad_alloc")));
    }

    void filesystemErrors_data()
    {
        QTest::addColumn<QString>("what");
        QTest::addColumn<QString>("from");
        QTest::addColumn<QString>("to");
        QTest::addColumn<QString>("said");
        QTest::newRow("rename") << "cannot rename"
                                << "/ckpt/latest.tmp"
                                << "/ckpt/latest"
                                << "cannot rename /ckpt/latest.tmp and /ckpt/latest: No space left on device";
        QTest::newRow("create directories") << "cannot create directories"
                                            << "/proc/x/y"
                                            << ""
                                            << "cannot create directories /proc/x/y: No space left on device";
        QTest::newRow("no verb") << "odd"
                                 << ""
                                 << ""
                                 << "cannot use: No space left on device";
    }
    void filesystemErrors()
    {
        QFETCH(QString, what);
        QFETCH(QString, from);
        QFETCH(QString, to);
        QFETCH(QString, said);
        const std::error_code nospace(ENOSPC, std::generic_category());
        const std::filesystem::filesystem_error e(what.toStdString(), from.toStdString(), to.toStdString(), nospace);
        const QString text = QString::fromStdString(loom::plainWhat(e));
        QCOMPARE(text, said);
        QVERIFY(!text.contains(QLatin1String("filesystem error")));
    }

    void jsonErrors()
    {
        try {
            const auto j = nlohmann::json::parse("{\"a\": ");
            QVERIFY(j.is_discarded());
            QFAIL("parsed");
        } catch (const std::exception& e) {
            const QString text = QString::fromStdString(loom::plainWhat(e));
            QVERIFY2(!text.contains(QLatin1String("[json.exception")), qPrintable(text));
        }
    }
};

QTEST_GUILESS_MAIN(TestPlainWhat)
#include "tst_plainwhat.moc"
