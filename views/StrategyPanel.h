#pragma once

#include "engine/plan/Layout.h"
#include "engine/plan/ProfileResolver.h"
#include "views/LayoutEdits.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QSpinBox;
class QTabWidget;

namespace loom::views {

// Every choice of a layout's strategy: model, cluster and nodes; tp, pp, dp (offering the valid values;
// impossible ones are listed disabled with the reason, and a typed impossible value is refused with it);
// vpp, micro-batch, global batch, schedule, ZeRO, recompute, precision; the DP codec and its parameter,
// error feedback, overlap, bucket and chunk sizes and the all-reduce algorithm. It never edits the layout
// itself: each change becomes a whole new layout handed out by editRequested().
class StrategyPanel : public QWidget {
    Q_OBJECT
public:
    explicit StrategyPanel(const plan::ProfileResolver* profiles, QWidget* parent = nullptr);

    // Shows `layout` (without emitting anything).
    void setLayout(const plan::Layout& layout);

    // Asks for a degree as if the user chose it; returns false and shows the reason when it is refused.
    bool requestDegree(Degree degree, std::int64_t value);
    // The last refusal shown (empty when the last request was accepted).
    QString message() const;
    QComboBox* degreeBox(Degree degree) const;

signals:
    void editRequested(const plan::Layout& next, const QString& text, int mergeId);

private:
    void build();
    // StrategyPanelBuild.cpp: the group boxes and their controls, and the controls' object names.
    QGroupBox* buildWhere();
    QGroupBox* buildParallelism();
    QGroupBox* buildMemory();
    QGroupBox* buildComm();
    void nameControls();
    // StrategyPanelEdits.cpp: each control's edit.
    void connectPlacement(); // model, cluster, nodes, cp
    void connectParallelism();
    void connectMemory();
    void connectComm();
    void refreshChoices();
    void requestEdit(const plan::Layout& next, const QString& text, int mergeId = -1);
    void refuse(const QString& why);

    const plan::ProfileResolver* m_profiles;
    plan::Layout m_layout;
    QComboBox *m_model, *m_cluster;
    QSpinBox* m_nodes;
    QComboBox *m_tp, *m_pp, *m_dp;
    QSpinBox *m_vpp, *m_microBatch, *m_globalBatch;
    QComboBox *m_schedule, *m_zero, *m_recompute, *m_precision, *m_codec, *m_allreduce;
    QDoubleSpinBox* m_topk;
    QCheckBox *m_errorFeedback, *m_overlap;
    QDoubleSpinBox *m_bucket, *m_chunk;
    QLabel* m_message;
    QTabWidget* m_groups; // the groups of controls, one a tab
    QGroupBox* m_scheduleGroup = nullptr; // schedule, vpp, micro-batch group and batch sizes (buildParallelism)
    QComboBox* m_order = nullptr; // rank order (which dimension varies fastest)
    QCheckBox* m_sp = nullptr; // parallel.sp
    QComboBox* m_attention = nullptr; // memory.attention
    QSpinBox* m_cp = nullptr; // parallel.cp (context parallelism)
    QSpinBox* m_group = nullptr; // parallel.microbatch_group (interleaved only; 0 shows "pp")
    QCheckBox* m_weightFill = nullptr; // parallel.weight_fill "idle" (zero-bubble schedules only)
    QCheckBox* m_efficientNorm = nullptr; // memory.efficient_norm
    QCheckBox* m_endsAsLayers = nullptr; // parallel.stages = accountedStageSplit (Llama 3's pipeline)
};

} // namespace loom::views
