#include "views/LayoutAnalysis.h"

#include "engine/plan/LayoutValidator.h"
#include "engine/plan/Simulator.h"

#include <QtConcurrent/QtConcurrentRun>

#include <chrono>

namespace loom::views {

LayoutAnalysis analyzeLayout(const plan::Layout& layout)
{
    const auto start = std::chrono::steady_clock::now();
    LayoutAnalysis a;
    a.layout = layout;
    a.diagnostics = plan::validateRules(layout);
    if (a.diagnostics.hasErrors()) {
        a.noPrediction = "no prediction until the layout is valid";
    } else if (!plan::simulatable(layout)) {
        a.noPrediction = "the schedule has " + plan::replayLimitText() + "; use fewer micro-batches or stages";
    } else {
        a.prediction = plan::predict(layout);
        plan::warnIfItDoesNotFit(layout, *a.prediction, a.diagnostics); // validateLayout's warning, one predict
    }
    a.elapsedMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return a;
}

AnalysisRunner::AnalysisRunner(QObject* parent)
    : QObject(parent)
{
    connect(&m_watcher, &QFutureWatcher<LayoutAnalysis>::finished, this, &AnalysisRunner::finished);
}

AnalysisRunner::~AnalysisRunner()
{
    m_watcher.waitForFinished();
}

void AnalysisRunner::request(const plan::Layout& layout)
{
    ++m_generation;
    if (m_running) {
        m_pending = layout;
        return;
    }
    start(layout, m_generation);
}

void AnalysisRunner::start(const plan::Layout& layout, std::uint64_t generation)
{
    m_running = true;
    m_watcher.setFuture(QtConcurrent::run([layout, generation] {
        LayoutAnalysis a = analyzeLayout(layout);
        a.generation = generation;
        return a;
    }));
}

void AnalysisRunner::finished()
{
    m_running = false;
    LayoutAnalysis result = m_watcher.result();
    if (m_pending) {
        const plan::Layout next = std::move(*m_pending);
        m_pending.reset();
        start(next, m_generation);
        return; // overtaken: the newest layout is being analysed
    }
    m_latest = std::move(result);
    emit analysisReady(m_latest);
}

} // namespace loom::views
