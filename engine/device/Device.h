#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace loom::device {

// Where the trainer's parameters, gradients, optimizer state and activations live, and the ordering of the
// work done on them. Kernels (engine/train/Kernels.h) compute on pointers from one Device; this interface
// owns the pointers themselves, their copies, and the streams and events that order and time the work.
// CpuDevice fills it with host memory (so every CPU test runs the code a GPU run will), CudaDevice with
// cudaMalloc, streams and events. No Qt here.

enum class DeviceKind { Cpu, Cuda };

// "cpu" or "cuda" (the spelling of loom-train --device).
const char* deviceKindName(DeviceKind kind);

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// A failed device operation (allocation, copy, launch), with the device's name and the call in the message.
class DeviceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Opaque handles. A default-constructed Stream is the device's default stream (ordered after everything
// submitted to it, like CUDA's legacy default stream). Events belong to the device that created them.
struct Stream {
    void* handle = nullptr;
};
struct Event {
    void* handle = nullptr;
};

class Device {
public:
    virtual ~Device() = default;

    virtual DeviceKind kind() const = 0;
    // A name a user can tell apart, e.g. "cpu" or "cuda:0 (NVIDIA H200)".
    virtual std::string name() const = 0;

    // Memory. allocateBytes returns memory aligned to at least 256 bytes, or throws DeviceError with the
    // size asked and, where known, the memory free. Zero bytes returns nullptr. freeBytes(nullptr) does
    // nothing; freeing waits for nothing (free only memory no stream still uses).
    virtual void* allocateBytes(std::size_t bytes) = 0;
    virtual void freeBytes(void* p) noexcept = 0;
    // Copies `bytes` from src to dst in stream order. Host pointers must stay valid until the stream is
    // synchronised (a CUDA copy from pageable memory may return before it is done). Throws DeviceError.
    virtual void copyBytes(void* dst, const void* src, std::size_t bytes, CopyKind kind, Stream stream = {}) = 0;
    // Sets `bytes` bytes at dst (device memory) to `value`, in stream order.
    virtual void fillBytes(void* dst, std::uint8_t value, std::size_t bytes, Stream stream = {}) = 0;
    // Sets n floats at dst (device memory) to `value`, in stream order (1.0f is not a byte pattern).
    virtual void fillFloats(float* dst, float value, std::size_t n, Stream stream = {}) = 0;

    // Streams: work on one stream runs in order; work on two streams may overlap unless an event orders it.
    virtual Stream createStream() = 0;
    virtual void destroyStream(Stream stream) noexcept = 0;
    // Blocks the host until everything submitted to `stream` is done.
    virtual void synchronize(Stream stream) = 0;
    // Blocks the host until everything submitted to the device is done.
    virtual void synchronize() = 0;

    // Events: a point in a stream's order. elapsedMs(start, end) is the device time between two recorded
    // events once both are complete (it waits for `end`); it throws DeviceError if either was never
    // recorded. waitEvent makes later work on `stream` wait for the work before the event, without
    // blocking the host.
    virtual Event createEvent() = 0;
    virtual void destroyEvent(Event event) noexcept = 0;
    virtual void recordEvent(Event event, Stream stream = {}) = 0;
    virtual void waitEvent(Stream stream, Event event) = 0;
    virtual void synchronizeEvent(Event event) = 0;
    virtual double elapsedMs(Event start, Event end) = 0;
};

// An owned, typed allocation on one Device (move-only; frees on destruction). Copies to and from host spans
// go through the device's default stream and synchronise, so the host data is ready on return.
template <class T> class Buffer {
public:
    Buffer() = default;
    Buffer(Device& device, std::size_t count)
        : device_(&device)
        , data_(static_cast<T*>(device.allocateBytes(count * sizeof(T))))
        , count_(count)
    {
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    Buffer(Buffer&& other) noexcept { swap(other); }
    Buffer& operator=(Buffer&& other) noexcept
    {
        Buffer(std::move(other)).swap(*this);
        return *this;
    }
    ~Buffer()
    {
        if (device_)
            device_->freeBytes(data_);
    }

    T* data() { return data_; }
    const T* data() const { return data_; }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(T); }
    Device* device() const { return device_; }

    // Host -> device: host.size() must equal size().
    void upload(std::span<const T> host)
    {
        checkCount(host.size(), "upload");
        device_->copyBytes(data_, host.data(), bytes(), CopyKind::HostToDevice);
        device_->synchronize(Stream {});
    }
    // Device -> host, into a new vector.
    std::vector<T> download() const
    {
        std::vector<T> host(count_);
        if (count_ > 0) {
            device_->copyBytes(host.data(), data_, bytes(), CopyKind::DeviceToHost);
            device_->synchronize(Stream {});
        }
        return host;
    }

private:
    void swap(Buffer& other) noexcept
    {
        std::swap(device_, other.device_);
        std::swap(data_, other.data_);
        std::swap(count_, other.count_);
    }
    void checkCount(std::size_t n, const char* what) const
    {
        if (n != count_)
            throw DeviceError(std::string("Buffer::") + what + ": " + std::to_string(n) + " elements for a buffer of "
                + std::to_string(count_) + " on " + (device_ ? device_->name() : std::string("no device")));
    }

    Device* device_ = nullptr;
    T* data_ = nullptr;
    std::size_t count_ = 0;
};

} // namespace loom::device
