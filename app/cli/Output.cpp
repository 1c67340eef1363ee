#include "app/cli/Output.h"

#include <QFile>

namespace loom::app {

void CliContext::openStore()
{
    if (m_tried)
        return;
    m_tried = true;
    try {
        m_store = std::make_unique<profiles::Store>(profiles::Store::defaultPath());
    } catch (const profiles::StoreError& e) {
        m_storeError = e.what();
    }
}

profiles::Store* CliContext::store()
{
    const bool first = !m_tried;
    openStore();
    if (!m_store && first)
        err << "warning: " << m_storeError << "; only built-in profiles are available\n";
    return m_store.get();
}

profiles::Store* CliContext::requireStore()
{
    openStore();
    if (!m_store)
        err << "error: " << m_storeError << "\n";
    return m_store.get();
}

profiles::ProfileCatalog& CliContext::catalog()
{
    if (!m_catalog)
        m_catalog = std::make_unique<profiles::ProfileCatalog>(store());
    return *m_catalog;
}

std::optional<std::string> readTextFile(const QString& path, std::string* why)
{
    QFile file(path);
    if (!file.exists()) {
        *why = "\"" + path.toStdString() + "\" does not exist; check the path";
        return std::nullopt;
    }
    if (!file.open(QIODevice::ReadOnly)) {
        *why = "cannot open \"" + path.toStdString() + "\": " + file.errorString().toStdString();
        return std::nullopt;
    }
    constexpr qint64 kLimit = qint64(kMaxTextFileMiB) << 20;
    if (file.size() > kLimit) {
        *why = "\"" + path.toStdString() + "\" is " + std::to_string(file.size() >> 20)
            + " MiB; this command reads files up to " + std::to_string(kMaxTextFileMiB) + " MiB";
        return std::nullopt;
    }
    QByteArray bytes = file.read(kLimit);
    return std::string(bytes.constData(), static_cast<std::size_t>(bytes.size()));
}

} // namespace loom::app
