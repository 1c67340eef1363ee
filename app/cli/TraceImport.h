#pragma once

#include "engine/bridges/TorchTrace.h"
#include "engine/plan/Layout.h"

#include <QStringList>

#include <optional>
#include <string>

namespace loom::app {

// PyTorch profiler traces read as one Loom trace, shared by `loom trace import` and File → Open Trace.
struct ImportedTrace {
    trace::TorchImport import;
    std::string otherData; // the "otherData" object Loom writes with the trace (JSON text)
};

// Reads `files` (one per rank, in rank order unless they record their rank). With a layout: each rank's
// pipeline stage and the TP / PP / DP names of recorded groups come from its rank grid, and the layout is
// kept in otherData (so trace stats and calibration know the run). Throws trace::TorchTraceError with a
// message naming the file, the field and what was expected.
ImportedTrace importTraceFiles(const QStringList& files, const std::optional<plan::Layout>& layout);

// A few lines for people: what was read, what the traces lack.
std::string describeImport(const ImportedTrace& imported, const QStringList& files);

} // namespace loom::app
