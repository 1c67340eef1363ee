// Checkpoints that were tampered with are refused on --resume, naming the file and what is wrong, instead of
// resuming silently (bytes appended to a tensor, inf in Adam's second moment, adam_steps = INT64_MAX, a FIFO
// in place of a tensor, which used to hang); writing a checkpoint never follows a link planted at latest.tmp.
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

#include <cstring>
#include <limits>

namespace {

const QByteArray kLayout = R"({"loom_layout": 1, "name": "tamper", "model": "gpt-tiny", "cluster": "local",
 "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 2, "global_batch": 4}})";

struct Result {
    int exitCode = -1; // -1: killed after the timeout (it hung)
    QString log;
};

// Copies folder `from` into `to` (one level of subfolders: DIR/step-N/FILE).
void copyTree(const QString& from, const QString& to)
{
    QDir().mkpath(to);
    for (const QFileInfo& e : QDir(from).entryInfoList(QDir::Files | QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (e.isDir())
            copyTree(e.filePath(), to + QLatin1Char('/') + e.fileName());
        else
            QFile::copy(e.filePath(), to + QLatin1Char('/') + e.fileName());
    }
}

} // namespace

class TestCheckpointTamper : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;
    QString m_layout, m_clean;

    Result train(const QStringList& args, int timeoutMs = 120000)
    {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(LOOM_TRAIN), QStringList { QStringLiteral("--layout"), m_layout } + args);
        if (!p.waitForFinished(timeoutMs)) {
            p.kill();
            p.waitForFinished();
            return { -1, QString::fromUtf8(p.readAll()) };
        }
        return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAll()) };
    }

    // The first file in the clean checkpoint's step folder whose name ends with `suffix` (not a moment file
    // unless asked).
    QString fileEndingWith(const QString& step, const QString& suffix)
    {
        for (const QString& name : QDir(step).entryList({ QStringLiteral("*") + suffix }, QDir::Files))
            if (suffix.contains(QLatin1String("adam")) || !name.contains(QLatin1String("adam")))
                return QDir(step).filePath(name);
        return {};
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        m_layout = m_dir.filePath(QStringLiteral("tamper.json"));
        QFile f(m_layout);
        QVERIFY(f.open(QIODevice::WriteOnly) && f.write(kLayout) == kLayout.size());
        f.close();
        m_clean = m_dir.filePath(QStringLiteral("clean"));
        const Result r = train({ "--steps", "2", "--checkpoint-dir", m_clean });
        QVERIFY2(r.exitCode == 0 && QFile::exists(m_clean + "/step-2/checkpoint.json"), qPrintable(r.log));
        // An untouched copy resumes.
        copyTree(m_clean, m_dir.filePath(QStringLiteral("untouched")));
        const Result ok = train({ "--steps", "3", "--checkpoint-dir", m_dir.filePath("untouched"), "--resume" });
        QVERIFY2(ok.exitCode == 0 && ok.log.contains("resumed from"), qPrintable(ok.log));
    }

    void tamperingRefused_data()
    {
        QTest::addColumn<QString>("tamper");
        QTest::addColumn<QString>("expected");
        QTest::newRow("bytes appended") << "append"
                                        << "bytes; the layout's";
        QTest::newRow("inf in adam_v") << "inf"
                                       << "finite numbers only";
        QTest::newRow("negative adam_v") << "negative"
                                         << "finite numbers only";
        QTest::newRow("adam_steps INT64_MAX") << "adam_steps"
                                              << "adam_steps=9223372036854775807";
        QTest::newRow("FIFO for a tensor") << "fifo"
                                           << "is not a regular file";
        QTest::newRow("tensor cut short") << "truncate"
                                          << "bytes; the layout's";
        QTest::newRow("FIFO for checkpoint.json") << "fifo-meta"
                                                  << "is not a regular file";
        QTest::newRow("FIFO for latest") << "fifo-latest"
                                         << "is not a regular file";
    }
    void tamperingRefused()
    {
        QFETCH(QString, tamper);
        QFETCH(QString, expected);
        const QString dir = m_dir.filePath(QStringLiteral("t-") + tamper);
        copyTree(m_clean, dir);
        const QString step = dir + QStringLiteral("/step-2");
        const QString tensor = fileEndingWith(step, QStringLiteral(".f32"));
        const QString moment = fileEndingWith(step, QStringLiteral(".adam_v.f32"));
        QVERIFY(!tensor.isEmpty() && !moment.isEmpty());
        if (tamper == QLatin1String("append") || tamper == QLatin1String("truncate")) {
            QFile f(tensor);
            QVERIFY(tamper == QLatin1String("append") ? f.open(QIODevice::Append) && f.write("\0\0\0\0", 4) == 4
                                                      : f.resize(f.size() - 4));
        } else if (tamper == QLatin1String("inf") || tamper == QLatin1String("negative")) {
            const float bad = tamper == QLatin1String("inf") ? std::numeric_limits<float>::infinity() : -1.0f;
            QFile f(moment);
            QVERIFY(f.open(QIODevice::ReadWrite) && f.seek(8));
            QVERIFY(f.write(reinterpret_cast<const char*>(&bad), 4) == 4);
        } else if (tamper == QLatin1String("adam_steps")) {
            QFile f(step + QStringLiteral("/checkpoint.json"));
            QVERIFY(f.open(QIODevice::ReadOnly));
            QByteArray text = f.readAll();
            f.close();
            const int at = text.indexOf("\"adam_steps\"");
            QVERIFY(at >= 0);
            const int end = text.indexOf(',', at);
            text.replace(at, end - at, "\"adam_steps\": 9223372036854775807");
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(text) == text.size());
        } else if (tamper.startsWith(QLatin1String("fifo"))) {
            const QString target = tamper == QLatin1String("fifo") ? tensor
                : tamper == QLatin1String("fifo-meta")             ? step + QStringLiteral("/checkpoint.json")
                                                                   : dir + QStringLiteral("/latest");
            QVERIFY(QFile::remove(target));
            QVERIFY(::mkfifo(QFile::encodeName(target).constData(), 0644) == 0);
        }
        const Result r = train({ "--steps", "3", "--checkpoint-dir", dir, "--resume" }, 60000);
        QVERIFY2(r.exitCode > 0, qPrintable(QStringLiteral("exit %1: %2").arg(r.exitCode).arg(r.log)));
        QVERIFY2(r.log.contains(expected) && !r.log.contains(QLatin1String("resumed from")), qPrintable(r.log));
    }

    // A link planted at latest.tmp (or a tensor's name) is replaced, its target left alone; latest is whole.
    void linksNeverFollowedWhenWriting()
    {
        const QString dir = m_dir.filePath(QStringLiteral("links"));
        QDir().mkpath(dir);
        const QString victim = m_dir.filePath(QStringLiteral("victim.txt"));
        QFile v(victim);
        QVERIFY(v.open(QIODevice::WriteOnly) && v.write("keep me\n") == 8);
        v.close();
        QVERIFY(QFile::link(victim, dir + QStringLiteral("/latest.tmp")));
        const Result r = train({ "--steps", "2", "--checkpoint-dir", dir });
        QVERIFY2(r.exitCode == 0, qPrintable(r.log));
        QVERIFY(v.open(QIODevice::ReadOnly));
        QCOMPARE(v.readAll(), QByteArray("keep me\n"));
        QFile latest(dir + QStringLiteral("/latest"));
        QVERIFY(latest.open(QIODevice::ReadOnly));
        QCOMPARE(latest.readAll(), QByteArray("step-2\n"));
        QVERIFY(!QFileInfo(dir + QStringLiteral("/latest")).isSymLink());
    }
};

QTEST_GUILESS_MAIN(TestCheckpointTamper)
#include "tst_checkpoint_tamper.moc"
