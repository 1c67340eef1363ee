#pragma once

#include <vector>

// The least-squares pieces of plan::calibrate: each measured duration is a row of two linear terms,
// predicted = a0·x0 + a1·x1, and the fit moves x0 and x1 (both kept positive).
namespace loom::plan::fit {

// One measured duration and the model's linear terms for it.
struct Row {
    double a0 = 0, a1 = 0, measured = 0, weight = 1;
};

// Which of the two parameters fitTwo moved.
struct Moved {
    bool first = false, second = false;
    bool proportional = false; // the rows cannot tell the two apart
};

// Fitted figures keep 4 significant digits: the measurements do not support more.
double rounded(double v);

// The root mean square of (predicted - measured) / measured, each row counted weight · measured times
// (the weights are count / duration, so that is the row's count).
double residualRms(const std::vector<Row>& rows, double x0, double x1);

// Weighted least squares of x0 and x1 (both > 0). Where the two columns are (nearly) proportional, or the
// joint fit puts one below zero, only one moves: the one that carries more of the predicted time when they
// are proportional, else the one whose fit leaves the smaller error. Returns which moved.
Moved fitTwo(const std::vector<Row>& rows, double& x0, double& x1);

// Weighted least squares of x1 alone with x0 fixed; false (x1 unchanged) when the best x1 is not positive.
bool fitSecond(const std::vector<Row>& rows, double x0, double& x1);

} // namespace loom::plan::fit
