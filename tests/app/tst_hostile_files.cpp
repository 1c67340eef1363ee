// Hostile input to the command line, second round: Slurm header values that would add sbatch options,
// inputs that are not regular files (a folder, a FIFO, /dev/zero on standard input), a device as the store,
// keys given twice, a layout far beyond this machine's memory, and --lr inf. Each case failed before it was
// fixed.
#include "ProcessRun.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <sys/stat.h>

namespace {

using loomtest::Run;

class TestHostileFiles : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    Run start(const QString& program, const QStringList& args, const QString& stdinFile = {}, const QString& db = {},
        int timeoutMs = 60000)
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LOOM_DB"), db.isEmpty() ? m_dir.filePath(QStringLiteral("files.db")) : db);
        return loomtest::runProcess(program, args, env, m_dir.path(), timeoutMs, stdinFile);
    }
    Run loom(const QStringList& args, const QString& stdinFile = {}, const QString& db = {})
    {
        return start(QStringLiteral(LOOM_EXE), args, stdinFile, db);
    }

    QString write(const QString& name, const QByteArray& text)
    {
        QFile f(m_dir.filePath(name));
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(text) != text.size())
            qFatal("cannot write %s", qPrintable(f.fileName()));
        return f.fileName();
    }

    static QByteArray tinyLayout(const QByteArray& parallel = R"("tp": 1, "pp": 1, "dp": 1)")
    {
        return R"({"loom_layout": 1, "name": "files", "model": "gpt-tiny", "cluster": "local", "parallel": {)"
            + parallel + R"(, "micro_batch": 1, "global_batch": 1}})";
    }

private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // An inline Slurm cluster whose partition or time limit would add an sbatch option: invalid for validate
    // and refused by run, naming the field.
    void slurmHeaderValuesRefused_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("value");
        QTest::newRow("partition --export") << "partition"
                                            << "gpu --export=ALL,OMPI_MCA_orte_fork_agent=/tmp/x";
        QTest::newRow("partition --error") << "partition"
                                           << "gpu --error=/etc/passwd";
        QTest::newRow("time --export") << "time_limit"
                                       << "10 --export=ALL,PATH=/tmp/evil";
        QTest::newRow("time words") << "time_limit"
                                    << "one hour";
    }
    void slurmHeaderValuesRefused()
    {
        QFETCH(QString, field);
        QFETCH(QString, value);
        QJsonObject launch { { "method", "slurm" } };
        launch[field] = value;
        const QJsonObject cluster { { "name", "inline-slurm" }, { "nodes", 1 }, { "devices_per_node", 1 },
            { "device",
                QJsonObject { { "name", "CPU core" }, { "memory_gb", 2 }, { "memory_bandwidth_gbs", 10 },
                    { "peak_tflops", QJsonObject { { "fp32", 0.09 }, { "fp16", 0.09 }, { "bf16", 0.09 } } } } },
            { "intra_node", QJsonObject { { "link", "shm" }, { "bandwidth_gbs", 5 }, { "latency_us", 1 } } },
            { "launch", launch } };
        QJsonObject l = QJsonDocument::fromJson(tinyLayout()).object();
        l[QStringLiteral("cluster")] = cluster;
        const QString file = write(QStringLiteral("slurm.json"), QJsonDocument(l).toJson());
        const Run v = loom({ QStringLiteral("validate"), file });
        QVERIFY2(v.exitCode == 2 && v.all().contains(QStringLiteral("cluster.launch.") + field), qPrintable(v.all()));
        const Run r = loom({ QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("1") });
        QVERIFY2(r.exitCode == 2 && r.err.contains(QLatin1String("nothing was started")), qPrintable(r.all()));
    }

    // Not regular files: a folder is called one, a FIFO is refused at once (it used to block in open), and
    // standard input is read by name with the same bound (/dev/zero used to be read until bad_alloc).
    void notRegularFiles()
    {
        const Run folder = loom({ QStringLiteral("validate"), QStringLiteral("/tmp") });
        QVERIFY2(folder.exitCode == 2 && folder.all().contains(QLatin1String("is a folder, not a file"))
                && !folder.all().contains(QLatin1String("MiB")),
            qPrintable(folder.all()));
        const QString fifo = m_dir.filePath(QStringLiteral("layout.fifo"));
        QVERIFY(::mkfifo(QFile::encodeName(fifo).constData(), 0644) == 0);
        for (const QStringList& args : { QStringList { QStringLiteral("validate"), fifo },
                 QStringList { QStringLiteral("plan"), QStringLiteral("predict"), fifo },
                 QStringList { QStringLiteral("run"), fifo },
                 QStringList { QStringLiteral("profiles"), QStringLiteral("import"), fifo } }) {
            const Run r = loom(args);
            QVERIFY2(r.exitCode > 0 && r.all().contains(QLatin1String("is not a regular file")),
                qPrintable(args.join(' ') + ": " + r.all()));
        }
        const Run zero = loom({ QStringLiteral("validate"), QStringLiteral("-") }, QStringLiteral("/dev/zero"));
        QVERIFY2(zero.exitCode == 2 && zero.all().contains(QLatin1String("standard input is larger than 16 MiB")),
            qPrintable(zero.all()));
        const Run piped = loom({ QStringLiteral("validate"), QStringLiteral("/dev/stdin") },
            write(QStringLiteral("ok.json"), tinyLayout()));
        QVERIFY2(piped.exitCode == 0, qPrintable(piped.all()));
    }

    // LOOM_DB naming a device is refused, and nothing is created beside it (/dev/null-journal).
    void storeOnADeviceRefused()
    {
        QFile::remove(QStringLiteral("/dev/null-journal")); // left by an older Loom, if any
        const Run r = loom({ QStringLiteral("runs"), QStringLiteral("list") }, {}, QStringLiteral("/dev/null"));
        QVERIFY2(r.exitCode == 1 && r.err.contains(QLatin1String("not a regular file")), qPrintable(r.all()));
        QVERIFY(!QFile::exists(QStringLiteral("/dev/null-journal")));
        QVERIFY(!QFile::exists(QStringLiteral("/dev/null-wal")));
    }

    // A key given twice is refused in a layout and in a profile, naming it (the last value used to win).
    void duplicateKeysRefused()
    {
        const Run v = loom({ QStringLiteral("validate"),
            write(QStringLiteral("twice.json"), tinyLayout(R"("tp": 1, "pp": 1, "dp": 1, "tp": 2)")) });
        QVERIFY2(v.exitCode == 2 && v.all().contains(QLatin1String("parallel.tp is given twice")), qPrintable(v.all()));
        const QByteArray profile = R"({"loom_profile": 1, "kind": "model", "name": "twice", "layers": 2,
            "hidden": 64, "heads": 2, "vocab": 256, "ffn_hidden": 256, "seq_len": 32, "layers": 200})";
        const Run p = loom({ QStringLiteral("profiles"), QStringLiteral("import"),
            write(QStringLiteral("twice-profile.json"), profile) });
        QVERIFY2(p.exitCode == 2 && p.all().contains(QLatin1String("\"layers\" is given twice")), qPrintable(p.all()));
    }

    // gpt3-175b on this machine: refused before any rank starts (and by loom-train before it allocates),
    // with the estimate, instead of every rank dying with std::bad_alloc.
    void layoutBeyondThisMachinesMemory()
    {
        const QString file = write(QStringLiteral("huge.json"),
            R"({"loom_layout": 1, "name": "huge", "model": "gpt3-175b", "cluster": "local",
                "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1}})");
        QElapsedTimer t;
        t.start();
        const Run r = loom({ QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("1") });
        QVERIFY2(r.exitCode == 2 && r.err.contains(QLatin1String("GB per rank"))
                && r.err.contains(QLatin1String("--ignore-memory"))
                && r.err.contains(QLatin1String("nothing was started")),
            qPrintable(r.all()));
        const Run e = start(QStringLiteral(LOOM_TRAIN_EXE), { QStringLiteral("--layout"), file });
        QVERIFY2(e.exitCode == 2 && e.err.contains(QLatin1String("GB per rank"))
                && !e.all().contains(QLatin1String("bad_alloc")),
            qPrintable(e.all()));
        QVERIFY2(t.elapsed() < 60000, "both refuse before allocating");
    }

    // plan search over more devices than any valid layout may use is refused at once with the limit (it used
    // to run for minutes and report layouts of 67 M devices).
    void searchBeyondTheRankLimitRefused()
    {
        const QByteArray wide = R"({"loom_profile": 1, "kind": "cluster", "name": "wide1024", "nodes": 1,
            "devices_per_node": 1024, "device": {"name": "GPU", "memory_gb": 80, "memory_bandwidth_gbs": 2000,
            "peak_tflops": {"fp32": 60, "fp16": 900, "bf16": 900}},
            "intra_node": {"link": "nvlink", "bandwidth_gbs": 450, "latency_us": 2},
            "inter_node": {"link": "infiniband", "bandwidth_gbs": 50, "latency_us": 5, "nics_per_node": 8}})";
        QCOMPARE(
            loom({ QStringLiteral("profiles"), QStringLiteral("import"), write(QStringLiteral("wide.json"), wide) })
                .exitCode,
            0);
        for (const char* nodes : { "16384", "65536", "1048576", "9223372036854775807" }) {
            const Run r = loom({ QStringLiteral("plan"), QStringLiteral("search"), QStringLiteral("--model"),
                QStringLiteral("gpt3-175b"), QStringLiteral("--cluster"), QStringLiteral("wide1024"),
                QStringLiteral("--nodes"), QString::fromLatin1(nodes), QStringLiteral("--global-batch"),
                QStringLiteral("1536"), QStringLiteral("--json") });
            QVERIFY2(r.exitCode == 2 && r.err.contains(QLatin1String("limit of 1048576 ranks"))
                    && r.err.contains(QLatin1String("search at most 1024 nodes"))
                    && !r.out.contains(QLatin1String("tp=")),
                qPrintable(QStringLiteral("%1 nodes: %2").arg(QLatin1String(nodes), r.all().left(2000))));
        }
    }

    // Profile names that print like another are refused; bidirectional controls are printed escaped.
    void lookAlikeNamesRefused_data()
    {
        QTest::addColumn<QString>("name");
        QTest::newRow("trailing space") << QStringLiteral("gpt-tiny ");
        QTest::newRow("leading space") << QStringLiteral(" gpt-tiny");
        QTest::newRow("zero-width space") << QStringLiteral("gpt-tiny\u200b");
        QTest::newRow("Cyrillic i") << QStringLiteral("gpt-t\u0456ny");
        QTest::newRow("upper case") << QStringLiteral("GPT-TINY");
        QTest::newRow("fullwidth g") << QStringLiteral("\uff47pt-tiny");
        QTest::newRow("right-to-left override") << QStringLiteral("tiny\u202egpt");
        QTest::newRow("no-break space") << QStringLiteral("gpt\u00a0tiny");
    }
    void lookAlikeNamesRefused()
    {
        QFETCH(QString, name);
        QJsonObject model { { "loom_profile", 1 }, { "kind", "model" }, { "name", name }, { "layers", 2 },
            { "hidden", 64 }, { "heads", 2 }, { "vocab", 256 }, { "ffn_hidden", 256 }, { "seq_len", 32 } };
        const Run r = loom({ QStringLiteral("profiles"), QStringLiteral("import"),
            write(QStringLiteral("alike.json"), QJsonDocument(model).toJson()) });
        QVERIFY2(r.exitCode == 2, qPrintable(r.all()));
        const Run list = loom({ QStringLiteral("profiles"), QStringLiteral("list"), QStringLiteral("--json") });
        for (const QJsonValue& p : QJsonDocument::fromJson(list.out.toUtf8()).array())
            QVERIFY2(p.toObject().value(QStringLiteral("name")).toString() != name, qPrintable(list.out));
    }
    void bidiControlsEscaped()
    {
        QJsonObject model { { "loom_profile", 1 }, { "kind", "model" }, { "name", "bidi-desc" },
            { "description", QStringLiteral("abc\u202edcba\u2066x\u2069") }, { "layers", 2 }, { "hidden", 64 },
            { "heads", 2 }, { "vocab", 256 }, { "ffn_hidden", 256 }, { "seq_len", 32 } };
        QCOMPARE(loom({ QStringLiteral("profiles"), QStringLiteral("import"),
                          write(QStringLiteral("bidi.json"), QJsonDocument(model).toJson()) })
                     .exitCode,
            0);
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LOOM_DB"), m_dir.filePath(QStringLiteral("files.db")));
        p.setProcessEnvironment(env);
        p.start(QStringLiteral(LOOM_EXE),
            { QStringLiteral("profiles"), QStringLiteral("show"), QStringLiteral("bidi-desc") });
        QVERIFY(p.waitForFinished(30000));
        const QByteArray out = p.readAllStandardOutput();
        QVERIFY2(
            !out.contains("\xe2\x80\xae") && !out.contains("\xe2\x81\xa6") && out.contains("\\u202e"), out.constData());
    }

    // --lr inf is refused like nan.
    void infiniteLearningRateRefused()
    {
        const QString file = write(QStringLiteral("lr.json"), tinyLayout());
        for (const char* lr : { "inf", "nan", "-inf", "infinity" }) {
            const Run e = start(QStringLiteral(LOOM_TRAIN_EXE),
                { QStringLiteral("--layout"), file, QStringLiteral("--lr"), QString::fromLatin1(lr) });
            QVERIFY2(e.exitCode == 64 && e.err.contains(QLatin1String("--lr ") + QLatin1String(lr) + " is not valid"),
                qPrintable(QStringLiteral("%1: %2").arg(lr, e.all())));
        }
    }
};

} // namespace

QTEST_GUILESS_MAIN(TestHostileFiles)
#include "tst_hostile_files.moc"
