#pragma once

#include <QString>
#include <QWidget>

#include <functional>

class QComboBox;
class QLabel;
class QTextBrowser;

namespace loom::views {

// "Explain this number": one figure's formula with the layout's (or the run's) values substituted, in a
// dock that can be read at length; the same text as the figure's tooltip (views/Explain.h). The topics are
// the Prediction panel's figures and the measured ones of a run; the text is asked of `source` each time it
// is shown or refreshed, so it follows the layout being edited.
class ExplainDock : public QWidget {
    Q_OBJECT
public:
    // Returns the rich text for a topic key ("bubble", "split.dp", "measured.bubble", ...).
    using Source = std::function<QString(const QString& key)>;
    explicit ExplainDock(Source source, QWidget* parent = nullptr);

    // The topics offered: the Prediction panel's figure keys and the measured ones, with captions.
    static const std::vector<std::pair<QString, QString>>& topics();
    // Shows a topic (empty: none); unknown keys are refused.
    bool showTopic(const QString& key);
    QString topic() const { return m_topic; }
    QString text() const;
    void refresh();
    QTextBrowser* browser() const { return m_browser; }

signals:
    void topicChanged(const QString& key);

private:
    Source m_source;
    QString m_topic;
    QComboBox* m_topics;
    QTextBrowser* m_browser;
};

} // namespace loom::views
