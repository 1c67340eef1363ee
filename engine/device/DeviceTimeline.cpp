#include "engine/device/DeviceTimeline.h"

namespace loom::device {

DeviceTimeline::DeviceTimeline(Device& device)
    : m_device(device)
{
}

DeviceTimeline::~DeviceTimeline()
{
    for (const Region& r : m_regions) {
        m_device.destroyEvent(r.begin);
        if (!r.open)
            m_device.destroyEvent(r.end);
    }
    for (Event e : m_free)
        m_device.destroyEvent(e);
    if (m_origin.handle)
        m_device.destroyEvent(m_origin);
}

Event DeviceTimeline::takeEvent()
{
    if (m_free.empty())
        return m_device.createEvent();
    const Event e = m_free.back();
    m_free.pop_back();
    return e;
}

void DeviceTimeline::start(Stream stream)
{
    for (const Region& r : m_regions) {
        m_free.push_back(r.begin);
        if (!r.open)
            m_free.push_back(r.end);
    }
    m_regions.clear();
    if (!m_origin.handle)
        m_origin = m_device.createEvent();
    m_device.recordEvent(m_origin, stream);
    m_started = true;
}

void DeviceTimeline::begin(const std::string& name, Stream stream)
{
    Region r { name, takeEvent(), {}, true };
    m_device.recordEvent(r.begin, stream);
    m_regions.push_back(std::move(r));
}

void DeviceTimeline::end(const std::string& name, Stream stream)
{
    for (auto r = m_regions.rbegin(); r != m_regions.rend(); ++r)
        if (r->open && r->name == name) {
            r->end = takeEvent();
            m_device.recordEvent(r->end, stream);
            r->open = false;
            return;
        }
    throw DeviceError(m_device.name() + ": timeline region \"" + name + "\" ended but never begun");
}

std::vector<DeviceTimeline::Span> DeviceTimeline::collect()
{
    if (!m_started)
        throw DeviceError(m_device.name() + ": timeline collected before start()");
    std::vector<Span> spans;
    for (const Region& r : m_regions) {
        if (r.open)
            throw DeviceError(m_device.name() + ": timeline region \"" + r.name + "\" begun and never ended");
        const double start = m_device.elapsedMs(m_origin, r.begin); // waits for the event, as elapsedMs promises
        spans.push_back({ r.name, start, m_device.elapsedMs(r.begin, r.end) });
    }
    return spans;
}

} // namespace loom::device
