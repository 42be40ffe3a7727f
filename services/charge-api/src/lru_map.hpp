// LruMap: a map that holds at most `capacity` entries and forgets the least recently used one to make
// room. What every memory of charge-api that a client can fill (API keys, clients, merchants) is made
// of, so that no flood grows it and no flood empties it all at once.
#pragma once

#include <cstddef>
#include <list>
#include <unordered_map>
#include <utility>

namespace charge_outbox::charge_api {

// Not thread-safe: its owner locks.
template <class Key, class Value>
class LruMap {
 public:
  explicit LruMap(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  // The value under `key`, now the most recently used, or nullptr.
  Value* Find(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Inserts or replaces; the least recently used entry goes when the map is full.
  Value& Put(const Key& key, Value value) {
    if (auto* existing = Find(key)) {
      *existing = std::move(value);
      return *existing;
    }
    if (index_.size() >= capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  void Erase(const Key& key) {
    const auto it = index_.find(key);
    if (it == index_.end()) return;
    order_.erase(it->second);
    index_.erase(it);
  }

  std::size_t size() const { return index_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::pair<Key, Value>>;
  std::size_t capacity_;
  Order order_;  // most recently used first
  std::unordered_map<Key, typename Order::iterator> index_;
};

}  // namespace charge_outbox::charge_api
