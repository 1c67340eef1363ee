#include "app/cli/Output.h"

#include "engine/trace/BoundedRead.h"

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
    std::string text;
    why->clear();
    if (!readBoundedFile(QFile::encodeName(path).toStdString(), std::size_t(kMaxTextFileMiB) << 20, &text, why))
        return std::nullopt;
    return text;
}

} // namespace loom::app
