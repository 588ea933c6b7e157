// Ids of the graph's arenas: 32-bit indices of distinct types, so a node id cannot be passed
// where a string or a subgraph is meant (values have their own handle, Value in types.h); and
// the guard that sets a piece of graph or builder state for a scope.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

namespace fastonnx {

// An index into one arena; `kUnset` is the id a default-constructed one holds.
template <typename Tag, uint32_t kUnset>
struct Id {
  uint32_t index = kUnset;
  constexpr Id() = default;
  constexpr explicit Id(uint32_t i) : index(i) {}
  constexpr bool is_set() const { return index != kUnset; }
  constexpr bool operator==(const Id&) const = default;
  constexpr auto operator<=>(const Id&) const = default;
};

// An interned string of the graph's StringPool; the default, 0, is the empty string (no name).
using StrId = Id<struct StrTag, 0>;
// A node of the graph's arena; the default is no node (a value no node produces).
using NodeId = Id<struct NodeTag, 0xFFFFFFFFu>;
// Which graph a node belongs to: the main graph (the default, 0), or a subgraph (the body of an
// If branch, a Loop or a Scan), numbered from 1.
using GraphId = Id<struct GraphTag, 0>;

inline constexpr StrId kNoName{};
inline constexpr NodeId kNoNode{};
inline constexpr GraphId kMainGraph{};

// The ids [begin, end) of one arena, for range-for.
template <typename IdT>
class IdRange {
 public:
  class iterator {
   public:
    explicit iterator(uint32_t i) : i_(i) {}
    IdT operator*() const { return IdT{i_}; }
    iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const iterator& o) const { return i_ != o.i_; }

   private:
    uint32_t i_;
  };
  IdRange(size_t begin, size_t end) : begin_(static_cast<uint32_t>(begin)), end_(static_cast<uint32_t>(end)) {}
  iterator begin() const { return iterator(begin_); }
  iterator end() const { return iterator(end_); }

 private:
  uint32_t begin_, end_;
};

// Sets a piece of state for the guard's lifetime and puts back what it held (MLIR's
// OpBuilder::InsertionGuard, for any state the graph and the Builder keep); made by the
// with_*() members of Graph and Builder.
template <typename T>
class [[nodiscard]] ScopedValue {
 public:
  ScopedValue(T& slot, T value) : slot_(slot), saved_(std::move(slot)) { slot_ = std::move(value); }
  ~ScopedValue() { slot_ = std::move(saved_); }
  ScopedValue(const ScopedValue&) = delete;
  ScopedValue& operator=(const ScopedValue&) = delete;

 private:
  T& slot_;
  T saved_;
};

}  // namespace fastonnx

template <typename Tag, uint32_t kUnset>
struct std::hash<fastonnx::Id<Tag, kUnset>> {
  size_t operator()(fastonnx::Id<Tag, kUnset> id) const noexcept { return std::hash<uint32_t>{}(id.index); }
};
