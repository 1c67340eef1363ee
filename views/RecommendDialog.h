#pragma once

#include "engine/plan/Layout.h"
#include "engine/plan/Search.h"

#include <QDialog>
#include <QFutureWatcher>

#include <atomic>
#include <memory>

class QLabel;
class QProgressBar;
class QPushButton;
class QTableView;
class QTimer;

namespace loom::views {

class CandidateModel;

// Runs the planner's search for the current model, cluster, nodes and batch in the background (with
// progress and cancel), lists the ranked layouts that fit and why the first wins, and hands the chosen one
// back (keeping the current layout's name and communication settings).
class RecommendDialog : public QDialog {
    Q_OBJECT
public:
    explicit RecommendDialog(const plan::Layout& current, QWidget* parent = nullptr);
    ~RecommendDialog() override;

    // Starts the search; done() or an error shows when it ends.
    void start();
    bool running() const;
    CandidateModel* candidates() const { return m_model; }
    // The layout to apply for a row of the list.
    plan::Layout layoutFor(int row) const;
    QString message() const;

signals:
    void layoutChosen(const plan::Layout& layout);
    void searchFinished();

private:
    void finished();
    void apply();

    struct Shared {
        std::atomic<double> progress { 0 };
        std::atomic<bool> cancel { false };
    };
    plan::Layout m_current;
    std::shared_ptr<Shared> m_shared;
    QFutureWatcher<plan::SearchResult> m_watcher;
    std::string m_error;
    CandidateModel* m_model;
    QTableView* m_table;
    QLabel* m_message;
    QProgressBar* m_progress;
    QPushButton *m_apply, *m_cancel;
    QTimer* m_poll;
    QString m_scope; // what the search kept of the current layout, said before its result
};

} // namespace loom::views
