#include "views/teaching/LessonActions.h"

#include "views/ExplainDock.h"
#include "views/LayoutAnalysis.h"
#include "views/LayoutDocument.h"
#include "views/RecommendDialog.h"
#include "views/RunMonitor.h"
#include "views/RunPanel.h"
#include "views/StrategyPanel.h"
#include "views/TopologyView.h"
#include "views/teaching/AllReduceStepper.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QMainWindow>
#include <QPushButton>
#include <QSpinBox>

#include <cmath>

namespace loom::views {

namespace {

void addRunFacts(const LessonContext& c, Facts& f)
{
    const RunMonitor* m = c.monitor;
    if (!m || m->runId() <= c.runBaseline)
        return;
    f["measured.state"] = profiles::toString(m->state()).toStdString();
    f["measured.steps"] = double(m->steps().size());
    if (!m->steps().empty()) {
        f["measured.loss"] = m->steps().back().loss;
        f["measured.lossDrop"] = m->steps().front().loss - m->steps().back().loss;
    }
    const auto& stats = m->stats();
    if (stats.steps > 0)
        f["measured.tokensPerSecond"] = stats.tokensPerSecond;
    if (!stats.stages.empty()) {
        f["measured.bubble"] = stats.stages.front().bubbleFraction;
        double gap = 0;
        for (const auto& s : stats.stages)
            gap = std::max(gap, 100.0 * std::abs(s.bubbleFraction - s.bubbleTheory));
        f["measured.bubbleGap"] = gap;
    }
    double busbw = 0;
    for (const auto& col : stats.collectives)
        busbw = std::max(busbw, col.busbwGBs);
    if (!stats.collectives.empty())
        f["measured.busbw"] = busbw;
}

QDockWidget* dockNamed(const LessonContext& c, const QString& shortName)
{
    return c.window->findChild<QDockWidget*>(shortName + QStringLiteral("Dock"));
}

bool inView(const LessonContext& c, const char* shortName)
{
    const QDockWidget* d = dockNamed(c, QLatin1String(shortName));
    return d && d->isVisible() && d->widget() && d->widget()->isVisible();
}

bool setStrategy(const LessonContext& c, const QString& name, const QJsonValue& value, QString* why)
{
    QWidget* w = c.strategy->findChild<QWidget*>(name);
    if (!w || !w->isEnabled()) {
        *why = QObject::tr("the %1 control is %2").arg(name, w ? QObject::tr("disabled") : QObject::tr("missing"));
        return false;
    }
    if (auto* box = qobject_cast<QComboBox*>(w)) {
        int index = -1;
        if (name == QLatin1String("tp") || name == QLatin1String("pp") || name == QLatin1String("dp"))
            index = box->findData(qlonglong(value.toDouble()));
        else if (name == QLatin1String("zero"))
            index = int(value.toDouble());
        else
            index = box->findText(value.toString());
        if (index < 0 || index >= box->count()) {
            *why = QObject::tr("%1 offers no %2").arg(name, value.toVariant().toString());
            return false;
        }
        box->setCurrentIndex(index);
        emit box->activated(index); // as when the user picks it
        if (!c.strategy->message().isEmpty()) {
            *why = c.strategy->message();
            return false;
        }
        return true;
    }
    if (auto* spin = qobject_cast<QSpinBox*>(w))
        spin->setValue(int(value.toDouble()));
    else if (auto* dspin = qobject_cast<QDoubleSpinBox*>(w))
        dspin->setValue(value.toDouble());
    else if (auto* check = qobject_cast<QCheckBox*>(w))
        check->setChecked(value.toBool());
    return c.strategy->message().isEmpty() || (*why = c.strategy->message(), false);
}

void raise(QDockWidget* dock)
{
    if (!dock)
        return;
    dock->show();
    dock->raise();
}

} // namespace

Facts gatherFacts(const LessonContext& c)
{
    Facts f;
    const plan::Layout& layout = c.document->layout();
    const LayoutAnalysis& a = c.analysis->latest();
    const bool current = a.generation > 0 && a.layout == layout;
    addLayoutFacts(
        layout, current && !a.diagnostics.hasErrors(), current && a.prediction ? &*a.prediction : nullptr, &f);
    addRunFacts(c, f);
    if (c.stepper) {
        f["stepper.group"] = c.stepper->groupKind().toStdString();
        f["stepper.algorithm"] = c.stepper->algorithm().toStdString();
        f["stepper.step"] = double(c.stepper->step());
        f["stepper.done"] = c.stepper->stepCount() > 0 && c.stepper->step() == c.stepper->stepCount();
        f["stepper.interNodeBytes"] = c.stepper->interNodeBytes();
        f["stepper.steps"] = double(c.stepper->stepCount());
        f["stepper.members"] = double(c.stepper->members());
        f["stepper.membersPerNode"] = double(c.stepper->membersPerNode());
        f["stepper.nodes"] = double(c.stepper->nodesSpanned());
        f["stepper.interNodeSteps"] = double(c.stepper->interNodeSteps());
        if (const QString nccl = c.stepper->ncclAlgorithm(); !nccl.isEmpty())
            f["stepper.ncclAlgorithm"] = nccl.toStdString();
    }
    f["view.schedule"] = inView(c, "schedule");
    f["view.timeline"] = inView(c, "timeline");
    f["view.metrics"] = inView(c, "metrics");
    f["view.allreduce"] = inView(c, "allreduce");
    if (c.explain && !c.explain->topic().isEmpty())
        f["explain.topic"] = c.explain->topic().toStdString();
    return f;
}

QWidget* lessonWidget(const LessonContext& c, const QString& name)
{
    if (name.isEmpty())
        return nullptr;
    return c.window->findChild<QWidget*>(name);
}

bool performLessonAction(const LessonContext& c, const LessonAction& a, QString* why)
{
    QString reason;
    bool ok = true;
    switch (a.kind) {
    case LessonAction::Kind::Set:
        ok = setStrategy(c, a.target, a.value, &reason);
        break;
    case LessonAction::Kind::Open:
        raise(dockNamed(c, a.target));
        ok = dockNamed(c, a.target) != nullptr;
        break;
    case LessonAction::Kind::Run:
        raise(dockNamed(c, QStringLiteral("run")));
        c.runPanel->stepsBox()->setValue(a.steps);
        if (!c.runPanel->runButton()->isEnabled()) {
            reason = c.runPanel->status();
            ok = false;
            break;
        }
        c.runPanel->runButton()->click();
        ok = c.monitor->running() || c.monitor->runId() > c.runBaseline;
        if (!ok)
            reason = c.runPanel->status();
        break;
    case LessonAction::Kind::Drop:
        emit c.map->blocksDropped(a.rank, a.first, a.last);
        break;
    case LessonAction::Kind::Stepper:
        raise(dockNamed(c, QStringLiteral("allreduce")));
        c.stepper->setGroupKind(a.target);
        c.stepper->setAlgorithm(a.value.toString());
        for (int i = 0; i < a.steps && c.stepper->step() < c.stepper->stepCount(); ++i)
            c.stepper->next();
        ok = c.stepper->stepCount() > 0;
        if (!ok)
            reason = QObject::tr("the group has a single member");
        break;
    case LessonAction::Kind::Explain:
        raise(dockNamed(c, QStringLiteral("explain")));
        ok = c.explain->showTopic(a.target);
        break;
    case LessonAction::Kind::Recommend:
        if (!c.recommend) {
            ok = false;
            break;
        }
        c.recommend();
        if (auto* dialog = c.window->findChild<RecommendDialog*>()) {
            // Apply the best layout once the search is done, as a learner would press Apply.
            QObject::connect(dialog, &RecommendDialog::searchFinished, dialog, [dialog] {
                for (QPushButton* b : dialog->findChildren<QPushButton*>())
                    if (b->text() == QObject::tr("Apply") && b->isEnabled())
                        b->click();
            });
        }
        break;
    }
    if (why)
        *why = reason;
    return ok;
}

} // namespace loom::views
