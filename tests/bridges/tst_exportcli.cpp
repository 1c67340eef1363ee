// loom export on the command line: --framework-version, the sbatch_options policy of loom run, and names
// with control characters that must neither break the files nor forge "==> NAME <==" headers on stdout.
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

namespace {

const QString kLayouts = QStringLiteral(LOOM_SOURCE_DIR "/tests/bridges/layouts/");

struct Result {
    int exitCode = -1;
    QByteArray out, err;
};

Result loom(const QStringList& args)
{
    QProcess p;
    p.start(QStringLiteral(LOOM_EXE), args);
    p.waitForFinished(60000);
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, p.readAllStandardOutput(),
        p.readAllStandardError() };
}

// A copy of a test layout with `change` applied to its JSON.
QString layoutWith(const QTemporaryDir& dir, const QString& name, const std::function<void(nlohmann::json&)>& change)
{
    QFile in(kLayouts + name);
    if (!in.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", qPrintable(name));
    auto j = nlohmann::json::parse(in.readAll().toStdString());
    change(j);
    const QString path = dir.path() + "/" + name;
    QFile out(path);
    if (!out.open(QIODevice::WriteOnly))
        qFatal("cannot write %s", qPrintable(path));
    out.write(QByteArray::fromStdString(j.dump()));
    return path;
}

} // namespace

class TestExportCli : public QObject {
    Q_OBJECT

private slots:
    void frameworkVersion()
    {
        const QString layout = kLayouts + "llama2-7b-slurm.json";
        auto r = loom({ "export", layout, "--to", "megatron", "--framework-version", "core_v0.13" });
        QCOMPARE(r.exitCode, 0);
        QVERIFY(r.out.contains("# For Megatron-LM core_v0.13 "));
        r = loom({ "export", layout, "--to", "megatron" });
        QVERIFY(r.out.contains("# For Megatron-LM core_v0.19 "));
        r = loom({ "export", layout, "--to", "megatron", "--framework-version", "core_v0.9" });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("framework version \"core_v0.9\": megatron exports are for core_v0.12,"), r.err);
        r = loom({ "export", layout, "--to", "torchtitan", "--framework-version", "main" });
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("no longer reads TOML job configs"), r.err);
    }

    // issue 32: a layout file's sbatch_options never reach an exported #SBATCH header.
    void sbatchOptionsRefused()
    {
        QTemporaryDir dir;
        const QString layout = layoutWith(dir, "llama2-7b-slurm.json",
            [](nlohmann::json& j) { j["cluster"]["launch"]["sbatch_options"] = { "--wrap=scontrol reboot" }; });
        for (const char* target : { "megatron", "deepspeed", "torchtitan" }) {
            const auto r = loom({ "export", layout, "--to", target });
            QCOMPARE(r.exitCode, 2);
            QVERIFY2(
                r.err.contains("cluster.launch.sbatch_options: a layout file may not pass options to sbatch"), r.err);
            QVERIFY(!r.out.contains("#SBATCH --wrap"));
        }
    }

    // issue 32: DEL and newlines in a name give valid TOML and no forged section header on stdout.
    void controlCharactersInNames()
    {
        QTemporaryDir dir;
        const QString layout
            = layoutWith(dir, "llama2-7b-ddp.json", [](nlohmann::json& j) { j["name"] = "ev\x7fil\n==> forged <=="; });
        const auto r = loom({ "export", layout, "--to", "torchtitan" });
        QCOMPARE(r.exitCode, 0);
        const auto lines = r.out.split('\n');
        const auto headers
            = std::count_if(lines.begin(), lines.end(), [](const QByteArray& l) { return l.startsWith("==> "); });
        QCOMPARE(headers, 2);
        QVERIFY2(r.out.contains("==> ev\\x7fil\\x0a==> forged <==.torchtitan.toml <==\n"), r.out);
        QVERIFY(!r.out.contains('\x7f'));
        // The script refers to the config with bash's $'...' escapes, so that it still parses.
        QVERIFY2(r.out.contains("$'ev\\x7fil\\x0a==> forged <==.torchtitan.toml'"), r.out);
    }
};

QTEST_APPLESS_MAIN(TestExportCli)
#include "tst_exportcli.moc"
