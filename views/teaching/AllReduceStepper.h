#pragma once

#include "engine/plan/Layout.h"
#include "views/teaching/AllReduceSteps.h"

#include <QPointer>
#include <QWidget>

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QTimer;

namespace loom::views {

class AllReduceOverlay;
class TopologyScene;

// The ring (or hierarchical) all-reduce of one DP or TP group of the layout, one step at a time: which
// chunk moves on which link at each of the steps (engine/plan/AllReduceSteps), with bytes per link and the
// α-β time of the cluster profile's links, drawn as arrows over the topology map. The buffer is what the
// layout all-reduces: a DP group its stage's gradients, a TP group one block's b·s·h activations.
class AllReduceStepper : public QWidget {
    Q_OBJECT
public:
    explicit AllReduceStepper(TopologyScene* scene, QWidget* parent = nullptr);
    ~AllReduceStepper() override;

    void setLayout(const plan::Layout& layout);
    // "dp" or "tp"; "ring" or "hierarchical". Both go back to step 0.
    void setGroupKind(const QString& kind);
    void setAlgorithm(const QString& algorithm);
    QString groupKind() const;
    QString algorithm() const;
    // Steps shown so far: 0 (none yet) … stepCount().
    int step() const { return m_step; }
    int stepCount() const { return int(m_steps.size()); }
    void setStep(int step);
    void next();
    void back();
    void reset() { setStep(0); }
    void toEnd() { setStep(stepCount()); }
    // Steps a second while playing (the speed box): 1, 2, 5, 10 or 20.
    void setSpeed(int stepsPerSecond);
    int speed() const;
    bool playing() const;
    // Members of the group, members on each of its nodes, the nodes it spans, steps that cross nodes.
    std::int64_t members() const { return std::int64_t(m_ranks.size()); }
    std::int64_t membersPerNode() const;
    std::int64_t nodesSpanned() const;
    int interNodeSteps() const;
    // NCCL's choice for this all-reduce on the layout's cluster (plan::ncclCollective: ring, tree or nvls),
    // empty where the layout's collectives do not run on NCCL.
    QString ncclAlgorithm() const;
    const std::vector<plan::AllReduceStep>& steps() const { return m_steps; }
    const std::vector<std::int64_t>& ranks() const { return m_ranks; }
    double bufferBytes() const { return m_bytes; }
    // The most bytes any member sends over inter-node links in the whole all-reduce.
    double interNodeBytes() const;
    QTableWidget* table() const { return m_table; }
    QLabel* summary() const { return m_summary; }
    QLabel* ncclLabel() const { return m_nccl; }
    QPushButton* playButton() const { return m_play; }
    QPushButton* endButton() const { return m_end; }
    QPushButton* backButton() const { return m_back; }
    QPushButton* nextButton() const { return m_next; }
    QComboBox* speedBox() const { return m_speed; }

signals:
    void stepChanged(int step);

protected:
    void showEvent(QShowEvent* event) override;
    void hideEvent(QHideEvent* event) override;

private:
    void recompute();
    void display();
    QString ncclText() const;

    TopologyScene* m_scene;
    QPointer<AllReduceOverlay> m_overlay;
    plan::Layout m_layout;
    std::vector<std::int64_t> m_ranks;
    std::vector<plan::AllReduceStep> m_steps;
    double m_bytes = 0;
    int m_step = 0;
    QComboBox *m_kind, *m_algorithm, *m_speed;
    QSpinBox* m_group;
    QPushButton *m_back, *m_next, *m_play, *m_end;
    QLabel *m_position, *m_summary, *m_nccl;
    QTableWidget* m_table;
    QTimer* m_timer;
};

// Bytes of the all-reduce the layout runs for a group of that kind: a DP group reduces pipeline rank
// `pipelineRank`'s gradients (its parameters ÷ tp, 4 bytes each in fp32, 2 in fp16 / bf16); a TP group one
// micro-batch's b·s·h activations.
double allReduceBytes(const plan::Layout& layout, bool dataParallel, std::int64_t pipelineRank);

} // namespace loom::views
