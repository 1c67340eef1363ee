#include "engine/plan/CalibrateFit.h"

#include <cmath>

namespace loom::plan::fit {

namespace {

double weightedError(const std::vector<Row>& rows, double x0, double x1)
{
    double sum = 0;
    for (const auto& r : rows) {
        const double e = r.a0 * x0 + r.a1 * x1 - r.measured;
        sum += r.weight * e * e;
    }
    return sum;
}

} // namespace

double rounded(double v)
{
    if (v == 0 || !std::isfinite(v))
        return v;
    const double scale = std::pow(10.0, 3 - std::floor(std::log10(std::fabs(v))));
    return std::round(v * scale) / scale;
}

double residualRms(const std::vector<Row>& rows, double x0, double x1)
{
    double sum = 0, weights = 0;
    for (const auto& r : rows) {
        const double rel = (r.a0 * x0 + r.a1 * x1 - r.measured) / r.measured;
        const double count = r.weight * r.measured; // weights are count / duration
        sum += count * rel * rel;
        weights += count;
    }
    return weights > 0 ? std::sqrt(sum / weights) : 0;
}

Moved fitTwo(const std::vector<Row>& rows, double& x0, double& x1)
{
    double s00 = 0, s01 = 0, s11 = 0, s0t = 0, s1t = 0, share0 = 0, share1 = 0;
    for (const auto& r : rows) {
        s00 += r.weight * r.a0 * r.a0;
        s01 += r.weight * r.a0 * r.a1;
        s11 += r.weight * r.a1 * r.a1;
        s0t += r.weight * r.a0 * r.measured;
        s1t += r.weight * r.a1 * r.measured;
        share0 += r.a0 * x0;
        share1 += r.a1 * x1;
    }
    auto only0 = [&](double keep1) { return s00 > 0 ? (s0t - s01 * keep1) / s00 : -1.0; };
    auto only1 = [&](double keep0) { return s11 > 0 ? (s1t - s01 * keep0) / s11 : -1.0; };
    const bool proportional = s00 <= 0 || s11 <= 0 || s01 * s01 >= (1.0 - 1e-6) * s00 * s11;
    if (!proportional) {
        const double det = s00 * s11 - s01 * s01;
        const double y0 = (s0t * s11 - s1t * s01) / det, y1 = (s1t * s00 - s0t * s01) / det;
        if (y0 > 0 && y1 > 0) {
            x0 = y0;
            x1 = y1;
            return { true, true, false };
        }
    }
    // One at a time: the one that carries more time when the columns are proportional, else the better fit.
    const double y0 = only0(x1), y1 = only1(x0);
    const bool ok0 = y0 > 0 && std::isfinite(y0), ok1 = y1 > 0 && std::isfinite(y1);
    bool use0 = ok0;
    if (ok0 && ok1)
        use0 = proportional ? share0 >= share1 : weightedError(rows, y0, x1) <= weightedError(rows, x0, y1);
    if (use0) {
        x0 = y0;
        return { true, false, proportional };
    }
    if (ok1) {
        x1 = y1;
        return { false, true, proportional };
    }
    return { false, false, proportional };
}

bool fitSecond(const std::vector<Row>& rows, double x0, double& x1)
{
    double s11 = 0, s1r = 0;
    for (const auto& r : rows) {
        s11 += r.weight * r.a1 * r.a1;
        s1r += r.weight * r.a1 * (r.measured - r.a0 * x0);
    }
    if (s11 <= 0 || s1r <= 0)
        return false;
    x1 = s1r / s11;
    return true;
}

} // namespace loom::plan::fit
