// Hostile but fair input to the `loom` command line: layouts that try to run commands or start a million
// processes, names with terminal escapes, JSON nested 100,000 deep, traces with impossible numbers, a trace
// over 64 MiB, and planner answers that must fit their cause. Each case failed before it was fixed.
#include "ProcessRun.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

namespace {

using loomtest::Run;

class TestHostile : public QObject {
    Q_OBJECT
    QTemporaryDir m_dir;

    Run loom(const QStringList& args, int timeoutMs = 120000)
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LOOM_DB"), m_dir.filePath(QStringLiteral("hostile.db")));
        return loomtest::runProcess(QStringLiteral(LOOM_EXE), args, env, m_dir.path(), timeoutMs);
    }

    QString write(const QString& name, const QByteArray& text)
    {
        QFile f(m_dir.filePath(name));
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(text) != text.size())
            qFatal("cannot write %s", qPrintable(f.fileName()));
        return f.fileName();
    }

    // A layout of gpt-tiny with `cluster` (a name or an inline object) and the given parallel degrees.
    QString layout(const QString& name, const QJsonValue& cluster, int dp = 1,
        const QString& title = QStringLiteral("hostile"), qint64 globalBatch = -1)
    {
        const QJsonObject l { { "loom_layout", 1 }, { "name", title }, { "model", "gpt-tiny" }, { "cluster", cluster },
            { "parallel",
                QJsonObject { { "tp", 1 }, { "pp", 1 }, { "dp", dp }, { "micro_batch", 1 },
                    { "global_batch", globalBatch > 0 ? globalBatch : dp } } } };
        return write(name, QJsonDocument(l).toJson());
    }

    static QJsonObject sshCluster(const QJsonArray& sshOptions)
    {
        return QJsonObject { { "name", "inline-ssh" }, { "nodes", 1 }, { "devices_per_node", 1 },
            { "device",
                QJsonObject { { "name", "CPU core" }, { "memory_gb", 2 }, { "memory_bandwidth_gbs", 10 },
                    { "peak_tflops", QJsonObject { { "fp32", 0.09 }, { "fp16", 0.09 }, { "bf16", 0.09 } } } } },
            { "intra_node", QJsonObject { { "link", "shm" }, { "bandwidth_gbs", 5 }, { "latency_us", 1 } } },
            { "hosts", QJsonArray { "127.0.0.1" } },
            { "launch", QJsonObject { { "method", "ssh" }, { "ssh_options", sshOptions } } } };
    }

    static QByteArray nested(int depth) { return QByteArray(depth, '[') + QByteArray(depth, ']'); }

private slots:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // A layout's inline launch options reach ssh only from the allow-list; -o, -F, -J and friends are
    // refused by `loom run` (nothing starts, so no ProxyCommand runs) and reported by `loom validate`.
    void layoutSshOptionsThatRunCommands_data()
    {
        QTest::addColumn<QJsonArray>("options");
        QTest::newRow("-oProxyCommand") << QJsonArray { "-oProxyCommand=touch PWNED" };
        QTest::newRow("-o ProxyCommand") << QJsonArray { "-o", "ProxyCommand=touch PWNED" };
        QTest::newRow("-o LocalCommand") << QJsonArray { "-o", "PermitLocalCommand=yes", "-o",
            "LocalCommand=touch PWNED" };
        QTest::newRow("-F") << QJsonArray { "-F", "/tmp/evil_config" };
        QTest::newRow("-J") << QJsonArray { "-J", "jump.example" };
        QTest::newRow("-p with an option as its value") << QJsonArray { "-p", "-oProxyCommand=touch PWNED" };
    }
    void layoutSshOptionsThatRunCommands()
    {
        QFETCH(QJsonArray, options);
        const QString file = layout(QStringLiteral("ssh.json"), sshCluster(options));
        const Run v = loom({ QStringLiteral("validate"), file });
        QCOMPARE(v.exitCode, 0); // the layout itself is valid; a run of it is refused
        QVERIFY2(
            v.out.contains(QLatin1String("loom run would refuse this")) && v.out.contains(QLatin1String("ssh_options")),
            qPrintable(v.all()));
        const Run r = loom({ QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("1") });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QLatin1String("cluster.launch.ssh_options"))
                && r.err.contains(QLatin1String("nothing was started")),
            qPrintable(r.all()));
        QVERIFY(!QFile::exists(m_dir.filePath(QStringLiteral("PWNED"))));
    }

    void layoutSshOptionsAllowed()
    {
        const QString file = layout(QStringLiteral("ssh-ok.json"),
            sshCluster(QJsonArray { "-p", "2222", "-l", "me", "-i", "/home/me/.ssh/lab", "-q" }));
        const Run v = loom({ QStringLiteral("validate"), file });
        QCOMPARE(v.exitCode, 0);
        QVERIFY2(!v.out.contains(QLatin1String("refuse")), qPrintable(v.all()));
    }

    void layoutMpirunOptionsRefused()
    {
        QJsonObject cluster = sshCluster({});
        QJsonObject launch = cluster[QStringLiteral("launch")].toObject();
        launch[QStringLiteral("mpirun_options")] = QJsonArray { "--mca", "plm_rsh_agent", "sh -c 'touch PWNED'" };
        launch[QStringLiteral("mpirun")] = QStringLiteral("/usr/bin/python3");
        cluster[QStringLiteral("launch")] = launch;
        const Run r = loom({ QStringLiteral("run"), layout(QStringLiteral("mpirun.json"), cluster) });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(
            r.err.contains(QLatin1String("mpirun_options")) && r.err.contains(QLatin1String("cluster.launch.mpirun=")),
            qPrintable(r.all()));
    }

    // dp = 4096 on the local cluster would start 4096 processes here: refused unless --max-local-ranks.
    void localRanksCapped()
    {
        const QString file = layout(QStringLiteral("many.json"), QStringLiteral("local"), 4096);
        const Run v = loom({ QStringLiteral("validate"), file });
        QVERIFY2(v.out.contains(QLatin1String("--max-local-ranks")), qPrintable(v.all()));
        const Run r = loom({ QStringLiteral("run"), file, QStringLiteral("--steps"), QStringLiteral("1") });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QLatin1String("4096 ranks")) && r.err.contains(QLatin1String("nothing was started")),
            qPrintable(r.all()));
        QCOMPARE(
            loom({ QStringLiteral("run"), file, QStringLiteral("--max-local-ranks"), QStringLiteral("0") }).exitCode,
            64);
    }

    // ESC (OSC: retitle the terminal), BEL and a C1 CSI reach the terminal escaped.
    void controlCharactersEscaped()
    {
        const QString title = QStringLiteral("evil\x1b]0;owned\x07 \x1b[2J csi\u009b2J");
        const QString file = layout(QStringLiteral("escape.json"), QStringLiteral("local"), 2, title);
        for (const QStringList& args : { QStringList { QStringLiteral("plan"), QStringLiteral("predict"), file },
                 QStringList { QStringLiteral("plan"), QStringLiteral("predict"), file, QStringLiteral("--json") },
                 QStringList { QStringLiteral("validate"), file } }) {
            const Run r = loom(args);
            QVERIFY2(r.exitCode == 0, qPrintable(r.all()));
            QVERIFY2(!r.rawOut.contains('\x1b') && !r.rawOut.contains('\x07') && !r.rawOut.contains("\xc2\x9b"),
                r.rawOut.constData());
            if (args.contains(QStringLiteral("--json")))
                QVERIFY(!QJsonDocument::fromJson(r.rawOut).isNull()); // the escapes are JSON escapes
        }
        QVERIFY(loom({ QStringLiteral("plan"), QStringLiteral("predict"), file })
                    .out.contains(QLatin1String("evil\\u001b]0;owned\\u0007")));
        // A profile's description, shown by profiles show, likewise; a name with control characters is refused.
        QJsonObject model { { "loom_profile", 1 }, { "kind", "model" }, { "name", "escapee" },
            { "description", "clear\x1b[2Jscreen" }, { "layers", 2 }, { "hidden", 64 }, { "heads", 2 },
            { "vocab", 256 }, { "ffn_hidden", 256 }, { "seq_len", 32 } };
        QCOMPARE(loom({ QStringLiteral("profiles"), QStringLiteral("import"),
                          write(QStringLiteral("m.json"), QJsonDocument(model).toJson()) })
                     .exitCode,
            0);
        const Run show = loom({ QStringLiteral("profiles"), QStringLiteral("show"), QStringLiteral("escapee") });
        QVERIFY2(!show.rawOut.contains('\x1b'), show.rawOut.constData());
        model[QStringLiteral("name")] = QStringLiteral("bad\x1bname");
        QCOMPARE(loom({ QStringLiteral("profiles"), QStringLiteral("import"),
                          write(QStringLiteral("m2.json"), QJsonDocument(model).toJson()) })
                     .exitCode,
            2);
    }

    // JSON nested 100,000 deep: every reader refuses it with a message, none crashes.
    void deepNestingRefused()
    {
        const QByteArray deep = nested(100000);
        const QString layoutFile = write(QStringLiteral("deep-layout.json"),
            R"({"loom_layout": 1, "name": "deep", "model": "gpt-tiny", "cluster": "local",
                                             "parallel": {"tp": 1, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1},
                                             "extra": )"
                + deep + "}");
        for (const QStringList& args : { QStringList { QStringLiteral("validate"), layoutFile },
                 QStringList { QStringLiteral("plan"), QStringLiteral("predict"), layoutFile },
                 QStringList { QStringLiteral("run"), layoutFile } }) {
            const Run r = loom(args);
            QVERIFY2(r.exitCode == 2 && r.all().contains(QLatin1String("nested deeper than 128")),
                qPrintable(args.join(' ') + ": " + r.all()));
        }
        const QString trace
            = write(QStringLiteral("deep-trace.json"), R"({"traceEvents": [], "otherData": )" + deep + "}");
        const Run t = loom({ QStringLiteral("trace"), QStringLiteral("stats"), trace });
        QVERIFY2(t.exitCode == 2 && t.err.contains(QLatin1String("nested deeper than 128")), qPrintable(t.all()));
        const Run c = loom({ QStringLiteral("plan"), QStringLiteral("calibrate"), trace, QStringLiteral("--cluster"),
            QStringLiteral("local") });
        QVERIFY2(c.exitCode > 0 && c.exitCode != -2 && !c.all().contains(QLatin1String("json.exception")),
            qPrintable(c.all()));
        const QString profile
            = write(QStringLiteral("deep-profile.json"), R"({"loom_profile": 1, "kind": "model", "x": )" + deep + "}");
        const Run p = loom({ QStringLiteral("profiles"), QStringLiteral("import"), profile });
        QVERIFY2(p.exitCode == 2 && p.err.contains(QLatin1String("nested deeper than 128")), qPrintable(p.all()));
    }

    // Trace events with impossible numbers are refused, naming the event and field; never a library message.
    void traceFieldsChecked_data()
    {
        QTest::addColumn<QByteArray>("event");
        QTest::addColumn<QString>("field");
        QTest::newRow("ts 1e300") << QByteArray(
            R"({"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1e300, "dur": 1})")
                                  << "ts";
        QTest::newRow("negative dur") << QByteArray(
            R"({"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1, "dur": -5})")
                                      << "dur";
        QTest::newRow("pid beyond int32")
            << QByteArray(R"({"ph": "X", "name": "forward", "pid": 1099511627776, "tid": 0, "ts": 1, "dur": 1})")
            << "pid";
        QTest::newRow("string step") << QByteArray(
            R"({"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1, "dur": 1, "args": {"step": "x"}})")
                                     << "args.step";
        QTest::newRow("huge number") << QByteArray(
            R"({"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1e400, "dur": 1})")
                                     << "1e400";
    }
    void traceFieldsChecked()
    {
        QFETCH(QByteArray, event);
        QFETCH(QString, field);
        const QString trace = write(QStringLiteral("fields.json"), "{\"traceEvents\": [" + event + "]}");
        const Run r = loom({ QStringLiteral("trace"), QStringLiteral("stats"), trace });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(field) && !r.err.contains(QLatin1String("json.exception")), qPrintable(r.err));
    }

    void traceInvalidLayoutFlagged()
    {
        const QString trace = write(QStringLiteral("badlayout.json"),
            R"({"traceEvents": [{"ph": "X", "name": "forward", "pid": 0, "tid": 0, "ts": 1, "dur": 5,
                                        "args": {"step": 0, "stage": 0}}],
                                        "otherData": {"layout": {"loom_layout": 1, "name": "x", "model": "gpt-tiny", "cluster": "local",
                                        "parallel": {"tp": 3, "pp": 1, "dp": 1, "micro_batch": 1, "global_batch": 1}}}})");
        const Run r = loom({ QStringLiteral("trace"), QStringLiteral("stats"), trace });
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(r.err.contains(QLatin1String("otherData.layout is not a valid layout")), qPrintable(r.all()));
    }

    // A trace over 64 MiB is read in full (streamed), not cut and called "not a Chrome trace".
    void traceOver64MiBRead()
    {
        QFile f(m_dir.filePath(QStringLiteral("big.json")));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write("{\"traceEvents\": [\n");
        const QByteArray pad(120, 'x');
        qint64 events = 0;
        while (f.size() < (66 << 20)) {
            QByteArray chunk;
            for (int i = 0; i < 1000; ++i, ++events)
                chunk += (events ? "," : "")
                    + QByteArray("{\"ph\": \"X\", \"name\": \"forward\", \"pid\": 0, \"tid\": 0, \"ts\": ")
                    + QByteArray::number(events * 10) + ", \"dur\": 5, \"args\": {\"step\": 0, \"note\": \"" + pad
                    + "\"}}\n";
            f.write(chunk);
        }
        f.write("]}\n");
        f.close();
        const Run r = loom(
            { QStringLiteral("trace"), QStringLiteral("stats"), f.fileName(), QStringLiteral("--json") }, 300000);
        QVERIFY2(r.exitCode == 0, qPrintable(r.err));
        QVERIFY(QJsonDocument::fromJson(r.rawOut).object().value(QStringLiteral("ranks")).toInt() == 1);
        QFile::remove(f.fileName());
    }

    // One rule: what predict and simulate cannot replay, validate calls invalid.
    void tooManyMicroBatchesInvalid()
    {
        const QString file
            = layout(QStringLiteral("micro.json"), QStringLiteral("local"), 1, QStringLiteral("micro"), 4194304);
        // 4,194,304 micro-batches: beyond the full replay, which the planner now extrapolates (plan/Simulator),
        // so validate and predict must agree that it is valid.
        const Run v = loom({ QStringLiteral("validate"), file });
        const Run p = loom({ QStringLiteral("plan"), QStringLiteral("predict"), file });
        QVERIFY2((v.exitCode == 2) == (p.exitCode == 2), qPrintable(v.all() + p.all()));
        QVERIFY2(p.exitCode == 0, qPrintable(p.all()));
    }

    // No layout splits this batch over so many devices: the advice names that, not "add nodes".
    void searchAdviceFitsTheCause()
    {
        const Run r = loom({ QStringLiteral("plan"), QStringLiteral("search"), QStringLiteral("--model"),
            QStringLiteral("gpt-tiny"), QStringLiteral("--cluster"), QStringLiteral("dgx-a100"),
            QStringLiteral("--nodes"), QStringLiteral("1000"), QStringLiteral("--global-batch"), QStringLiteral("7") });
        QCOMPARE(r.exitCode, 0);
        QVERIFY2(
            !r.out.contains(QLatin1String("add nodes")) && r.out.contains(QLatin1String("no split of 8000 devices")),
            qPrintable(r.all()));
        QVERIFY(!r.out.contains(QLatin1String("nan")));
    }
};

} // namespace

QTEST_GUILESS_MAIN(TestHostile)
#include "tst_hostile.moc"
