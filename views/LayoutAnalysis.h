#pragma once

#include "engine/plan/CostModel.h"
#include "engine/plan/Diagnostics.h"
#include "engine/plan/Layout.h"

#include <QFutureWatcher>
#include <QObject>

#include <cstdint>
#include <optional>

namespace loom::views {

// What the workbench shows about a layout: every validation problem and, when the layout is valid, the
// planner's prediction (with the simulated timeline of one rank per stage).
struct LayoutAnalysis {
    std::uint64_t generation = 0; // which request this answers
    plan::Layout layout; // the layout analysed
    plan::Diagnostics diagnostics;
    std::optional<plan::Prediction> prediction;
    std::string noPrediction; // why there is none, when there is none
    double elapsedMs = 0;
};

// Validates and predicts; pure, runs on any thread.
LayoutAnalysis analyzeLayout(const plan::Layout& layout);

// Re-analyses the layout after every edit on a worker thread, so the window never waits for the planner.
// Only the newest request matters: while one runs, later requests replace each other and the newest runs
// next; results of requests that were overtaken are dropped.
class AnalysisRunner : public QObject {
    Q_OBJECT
public:
    explicit AnalysisRunner(QObject* parent = nullptr);
    ~AnalysisRunner() override;

    void request(const plan::Layout& layout);
    bool busy() const { return m_running; }
    // The newest analysis delivered (generation 0 before the first).
    const LayoutAnalysis& latest() const { return m_latest; }

signals:
    void analysisReady(const loom::views::LayoutAnalysis& analysis);

private:
    void start(const plan::Layout& layout, std::uint64_t generation);
    void finished();

    QFutureWatcher<LayoutAnalysis> m_watcher;
    std::optional<plan::Layout> m_pending;
    std::uint64_t m_generation = 0;
    bool m_running = false;
    LayoutAnalysis m_latest;
};

} // namespace loom::views
