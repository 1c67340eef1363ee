#pragma once

#include <QLocale>
#include <QObject>
#include <QString>

namespace loom::views {

// Bytes in the unit that fits (GB, MB, kB, B; decimal, as the planner's GB), so that a small figure never
// reads "0.00 GB".
inline QString memoryText(double bytes)
{
    const QLocale locale;
    const double a = bytes < 0 ? -bytes : bytes;
    if (a >= 1e9)
        return locale.toString(bytes / 1e9, 'f', 2) + QStringLiteral(" GB");
    if (a >= 1e6)
        return locale.toString(bytes / 1e6, 'f', 1) + QStringLiteral(" MB");
    if (a >= 1e3)
        return locale.toString(bytes / 1e3, 'f', 1) + QStringLiteral(" kB");
    return locale.toString(bytes, 'f', 0) + QStringLiteral(" B");
}

// Gigabytes as the Prediction panel and the Explain dock print them: two decimals under 10 GB, one above, and a
// small figure in the unit that fits (never "0.00 GB").
inline QString gigabytesText(double gb)
{
    if (gb != 0 && gb < 0.1)
        return memoryText(gb * 1e9);
    return QLocale().toString(gb, 'f', gb < 10 ? 2 : 1) + QStringLiteral(" GB");
}

// A rate in bytes per second in the unit that fits (GB/s, MB/s, kB/s, B/s).
inline QString rateText(double bytesPerSecond)
{
    return memoryText(bytesPerSecond) + QStringLiteral("/s");
}

// A range of transformer blocks in words: "block 42" for one, "blocks 40–42" for several.
inline QString blocksText(long long first, long long last)
{
    return first == last ? QObject::tr("block %1").arg(first) : QObject::tr("blocks %1–%2").arg(first).arg(last);
}

} // namespace loom::views
