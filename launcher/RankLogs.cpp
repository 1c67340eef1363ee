#include "launcher/RankLogs.h"

#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include <algorithm>

namespace loom::launcher {

RankLogs rankLogsOf(const QString& command)
{
    // mpirun's own option (local runs), srun's --error pattern, the head node's run folder (ssh), sbatch's
    // --chdir (the run folder, whose job.sbatch runs mpirun --output-filename <run folder>/logs).
    static const QRegularExpression where(
        QStringLiteral("--output-filename (\\S+)|--error=(\\S+)/rank\\.%t\\.stderr|each rank's output in "
                       "(\\S+)>|^sbatch .*--chdir (\\S+) "));
    const auto m = where.match(command);
    if (!m.hasMatch())
        return {};
    if (!m.captured(1).isEmpty())
        return { m.captured(1), false };
    if (!m.captured(2).isEmpty())
        return { QString(m.captured(2)).replace(QStringLiteral("%%"), QStringLiteral("%")), false };
    if (!m.captured(3).isEmpty())
        return { m.captured(3), true };
    return { m.captured(4) + QStringLiteral("/logs"), false };
}

std::vector<RankLogFile> rankLogFiles(const QString& dir, int limit)
{
    static const QRegularExpression srunName(QStringLiteral("^rank\\.([0-9]{1,9})\\.(stdout|stderr)$"));
    static const QRegularExpression mpiDir(QStringLiteral("^rank\\.([0-9]{1,9})$"));
    std::vector<RankLogFile> files;
    QDirIterator it(dir, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext() && int(files.size()) < limit) {
        const QFileInfo f(it.next());
        if (const auto m = srunName.match(f.fileName());
            m.hasMatch() && f.absolutePath() == QFileInfo(dir).absoluteFilePath())
            files.push_back({ m.captured(1).toInt(), m.captured(2), f.filePath() });
        else if (const auto d = mpiDir.match(f.dir().dirName());
                 d.hasMatch() && (f.fileName() == QLatin1String("stdout") || f.fileName() == QLatin1String("stderr")))
            files.push_back({ d.captured(1).toInt(), f.fileName(), f.filePath() });
    }
    std::sort(files.begin(), files.end(), [](const RankLogFile& a, const RankLogFile& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.stream < b.stream;
    });
    return files;
}

QString readLogTail(const QString& path, qint64 maxBytes, QString* error)
{
    const QFileInfo info(path);
    QFile f(path);
    if (!info.isFile()) {
        *error = QStringLiteral("%1 is not a regular file").arg(path);
        return {};
    }
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("cannot read %1: %2").arg(path, f.errorString());
        return {};
    }
    const qint64 size = f.size();
    const bool cut = size > maxBytes;
    if (cut)
        f.seek(size - maxBytes);
    QByteArray data = f.read(maxBytes);
    if (cut) // from the first whole line
        data.remove(0, data.indexOf('\n') + 1);
    // Rank 0's standard output holds the telemetry frames: binary to a reader, and in the store already.
    QString text;
    qint64 frames = 0;
    for (const QByteArray& line : data.split('\n')) {
        if (line.startsWith('\x1e'))
            ++frames;
        else if (!line.isEmpty())
            text += QString::fromUtf8(line) + QLatin1Char('\n');
    }
    QString notes;
    if (cut)
        notes += QStringLiteral("[%1: the first %2 of its %3 bytes are left out]\n")
                     .arg(info.fileName())
                     .arg(size - data.size())
                     .arg(size);
    if (frames > 0)
        notes += QStringLiteral("[%1 telemetry frames left out: they are in the run's store]\n").arg(frames);
    return notes + text;
}

} // namespace loom::launcher
