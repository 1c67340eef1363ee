#pragma once

#include <QLocale>
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

// A rate in bytes per second in the unit that fits (GB/s, MB/s, kB/s, B/s).
inline QString rateText(double bytesPerSecond)
{
    return memoryText(bytesPerSecond) + QStringLiteral("/s");
}

} // namespace loom::views
