#pragma once

#include <QDialog>

class QLabel;
class QListWidget;
class QPlainTextEdit;

namespace loom::views {

// Each rank's log of a run (launcher/RankLogs): the files where mpirun or srun kept them, listed by rank and
// stream; the selected one shown from its end (at most kShownBytes, without telemetry frames). For a run
// over ssh the logs are on the head node: the dialog says where.
class RankLogsDialog : public QDialog {
    Q_OBJECT
public:
    static constexpr qint64 kShownBytes = 1 << 20;

    // `command` is the run's stored command (it says where the logs are).
    RankLogsDialog(qint64 runId, const QString& command, QWidget* parent = nullptr);
    QListWidget* files() const { return m_files; }
    QPlainTextEdit* text() const { return m_text; }
    QLabel* where() const { return m_where; }

private:
    void showFile(int row);

    QLabel* m_where;
    QListWidget* m_files;
    QPlainTextEdit* m_text;
};

} // namespace loom::views
