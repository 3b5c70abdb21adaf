// Request and response messages for a callback gRPC method, pooled so that a warmed-up call of
// a repeated shape takes nothing from the heap for them (gRPC's default makes both messages
// anew per call, and every repeated field and map entry inside them with them).
//
// Each pooled holder has
//   - the request on a protobuf arena whose first block the holder owns. The arena is reset
//     when the holder is handed out, on the thread that then parses into it (gRPC allocates and
//     parses on one thread), because a protobuf arena's block belongs to the thread that reset
//     it and any other thread would take a new block from the heap. A request that outgrew the
//     block gets a block of its size, up to kMaxBlockBytes, the next time.
//   - the response as a plain message kept from call to call: the method's handler overwrites
//     it in place (its repeated fields and map entries keep their capacity), so it may be
//     written on any thread. A response that came to more than kMaxBlockBytes is dropped.
// The pool keeps at most kMaxPooledBytes of blocks; holders past that are freed on release.
#pragma once

#include <google/protobuf/arena.h>
#include <grpcpp/support/message_allocator.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace lockstep {

template <typename Request, typename Response>
class PooledMessageAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  static constexpr size_t kFirstBlockBytes = 16 << 10;
  static constexpr size_t kMaxBlockBytes = 1 << 20;
  static constexpr size_t kMaxPooledBytes = 64 << 20;

  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    std::unique_ptr<Holder> holder;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        holder = std::move(free_.back());
        free_.pop_back();
        pooled_bytes_ -= holder->block_bytes();
      }
    }
    if (holder == nullptr) holder = std::make_unique<Holder>(*this);
    holder->Prepare();
    // gRPC owns it until it calls Release, which gives it back to the pool.
    return holder.release();
  }

  // Holders waiting in the pool (for tests).
  size_t pooled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

 private:
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    explicit Holder(PooledMessageAllocator& pool) : pool_(pool) {}

    size_t block_bytes() const { return block_bytes_; }

    // Readies the messages on the thread that parses the request.
    void Prepare() {
      const size_t used = arena_ ? static_cast<size_t>(arena_->SpaceAllocated()) : 0;
      if (!arena_ || (used > block_bytes_ && block_bytes_ < kMaxBlockBytes)) {
        arena_.reset();  // before its block goes
        block_bytes_ = std::clamp(std::bit_ceil(used), kFirstBlockBytes, kMaxBlockBytes);
        block_ = std::make_unique_for_overwrite<char[]>(block_bytes_);
        google::protobuf::ArenaOptions options;
        options.initial_block = block_.get();
        options.initial_block_size = block_bytes_;
        arena_.emplace(options);
      } else {
        arena_->Reset();
      }
      this->set_request(google::protobuf::Arena::CreateMessage<Request>(&*arena_));
      if (static_cast<size_t>(response_.GetCachedSize()) > kMaxBlockBytes) response_ = Response();
      this->set_response(&response_);
    }

    void Release() override { pool_.Put(std::unique_ptr<Holder>(this)); }

   private:
    PooledMessageAllocator& pool_;
    size_t block_bytes_ = 0;
    std::unique_ptr<char[]> block_;
    std::optional<google::protobuf::Arena> arena_;
    Response response_;
  };

  void Put(std::unique_ptr<Holder> holder) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pooled_bytes_ + holder->block_bytes() > kMaxPooledBytes) return;  // freed here
    pooled_bytes_ += holder->block_bytes();
    free_.push_back(std::move(holder));
  }

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Holder>> free_;
  size_t pooled_bytes_ = 0;
};

}  // namespace lockstep
