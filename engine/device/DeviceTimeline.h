#pragma once

#include "engine/device/Device.h"

#include <string>
#include <vector>

namespace loom::device {

// Device time of named regions (forward, backward, optimizer, a collective), for traces: the events are
// recorded in stream order as the work is queued, and read only after the device has finished (collect), so
// timing costs no synchronisation during a step. A trace shows when the GPU worked, not when the host
// queued it. Times are milliseconds from the timeline's origin, an event recorded by start(); the caller maps
// the origin to its trace clock (the host time at which start() was called is a close lower bound, as the
// origin event completes once the stream reaches it). On CpuDevice the same code gives host times.
class DeviceTimeline {
public:
    struct Span {
        std::string name;
        double startMs = 0, durationMs = 0;
    };

    explicit DeviceTimeline(Device& device);
    ~DeviceTimeline();
    DeviceTimeline(const DeviceTimeline&) = delete;
    DeviceTimeline& operator=(const DeviceTimeline&) = delete;

    // Records the origin on `stream` and forgets earlier regions (one step each, say).
    void start(Stream stream = {});
    // A region on `stream`: begin() and end() record events in that stream's order; regions may nest or
    // run on several streams. end() closes the most recent open region of the same name.
    void begin(const std::string& name, Stream stream = {});
    void end(const std::string& name, Stream stream = {});
    // Waits for the last region's end and returns every closed region in begin order; throws DeviceError
    // naming a region that was begun and never ended, or when start() was not called.
    std::vector<Span> collect();

private:
    struct Region {
        std::string name;
        Event begin, end;
        bool open = true;
    };
    Event takeEvent();

    Device& m_device;
    Event m_origin {};
    bool m_started = false;
    std::vector<Region> m_regions;
    std::vector<Event> m_free; // events kept between steps: creating them is not free on a GPU
};

} // namespace loom::device
