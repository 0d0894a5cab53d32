// One column of a segment ([T, B] actions, [T, B, D] observations, ...):
// either values of its own (what an explorer builds) or a view of the
// received message's bytes (what the decoder hands the learner, checked
// once, never copied). It reads like a const std::vector<T>; any write
// first gives a viewing column values of its own (copy on write), so a
// decoded segment can be edited like a built one and a view never
// changes under another reader.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

namespace rlx {

template <class T>
class Column {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using const_iterator = const T*;
  using iterator = T*;

  Column() = default;
  Column(std::vector<T> values) : own_(std::move(values)) {}  // NOLINT: reads as a vector
  Column(std::initializer_list<T> values) : own_(values) {}
  Column(std::size_t n, const T& value) : own_(n, value) {}
  template <class It>
  Column(It first, It last) : own_(first, last) {}

  // A view of `n` values at `data`, kept alive by `keep` (the message).
  static Column view(const T* data, std::size_t n, std::shared_ptr<const void> keep) {
    Column c;
    c.view_ = data;
    c.view_size_ = n;
    c.keep_ = std::move(keep);
    return c;
  }

  // True while the column reads another's bytes (no copy was made).
  bool is_view() const { return keep_ != nullptr; }
  // What keeps a view's bytes alive (the message), for a reader that
  // outlives the column (an explorer's parameters viewing a weight set).
  const std::shared_ptr<const void>& keeper() const { return keep_; }

  // Reading: never copies.
  std::size_t size() const { return is_view() ? view_size_ : own_.size(); }
  bool empty() const { return size() == 0; }
  const T* data() const { return is_view() ? view_ : own_.data(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  const T* cbegin() const { return begin(); }
  const T* cend() const { return end(); }
  const T& operator[](std::size_t i) const { return data()[i]; }
  const T& front() const { return data()[0]; }
  const T& back() const { return data()[size() - 1]; }
  std::span<const T> span() const { return {data(), size()}; }
  // The values as a vector of their own (a copy when viewing).
  std::vector<T> to_vector() const { return std::vector<T>(begin(), end()); }

  // Writing: a viewing column copies its values first. Mind that the
  // non-const begin()/end()/data()/[] (what a range-for or std::span over
  // a non-const column calls) are writers: read through a const
  // reference, or span(), where a copy would cost.
  std::vector<T>& values() {
    if (is_view()) {
      own_.assign(view_, view_ + view_size_);
      view_ = nullptr;
      view_size_ = 0;
      keep_.reset();
    }
    return own_;
  }
  T* data() { return values().data(); }
  T* begin() { return values().data(); }
  T* end() { return values().data() + own_.size(); }
  T& operator[](std::size_t i) { return values()[i]; }
  T& back() { return values().back(); }
  void clear() { drop_view(), own_.clear(); }
  void reserve(std::size_t n) { values().reserve(n); }
  void resize(std::size_t n) { values().resize(n); }
  void resize(std::size_t n, const T& v) { values().resize(n, v); }
  void assign(std::size_t n, const T& v) { drop_view(), own_.assign(n, v); }
  template <class It>
  void assign(It first, It last) {
    std::vector<T> fresh(first, last);  // `first` may point into this column
    drop_view();
    own_ = std::move(fresh);
  }
  void assign(std::initializer_list<T> v) { drop_view(), own_.assign(v); }
  void push_back(const T& v) { values().push_back(v); }
  void pop_back() { values().pop_back(); }
  template <class... A>
  T& emplace_back(A&&... a) {
    return values().emplace_back(std::forward<A>(a)...);
  }
  // `pos` from this column's own begin()/end() (which gave it values of its own).
  template <class It>
  void insert(const T* pos, It first, It last) {
    auto& v = values();
    const auto at = pos - v.data();
    v.insert(v.begin() + at, first, last);
  }

  friend bool operator==(const Column& a, const Column& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }
  friend bool operator==(const Column& a, const std::vector<T>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void drop_view() {
    view_ = nullptr;
    view_size_ = 0;
    keep_.reset();
  }

  std::vector<T> own_;
  const T* view_ = nullptr;
  std::size_t view_size_ = 0;
  std::shared_ptr<const void> keep_;
};

}  // namespace rlx
