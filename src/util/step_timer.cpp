#include "util/step_timer.hpp"

#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace exg {

uint64_t StepTimer::now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

StepTimer::~StepTimer() {
  if (page_) ::munmap(page_, sizeof(ChildPage));
}

bool StepTimer::start() {
  if (!page_) {
    void* p = ::mmap(nullptr, sizeof(ChildPage), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    page_ = static_cast<ChildPage*>(p);
  }
  page_->count = 0;
  marks_.clear();
  marks_.reserve(48);
  origin_ns_ = now_ns();
  on_ = true;
  return true;
}

void StepTimer::mark_at(const char* name, uint64_t at) {
  // Kept in time order: a mark of the supervisor made while the child's were
  // still in its page goes where it belongs when they are merged.
  auto pos = std::upper_bound(marks_.begin(), marks_.end(), at, [](uint64_t t, const Mark& m) { return t < m.at_ns; });
  marks_.insert(pos, Mark{name, at});
}

void StepTimer::child_mark(const char* name) {
  if (!on_ || !page_) return;
  uint32_t n = page_->count;
  if (n >= kMaxChildMarks) return;
  ChildMark& m = page_->marks[n];
  std::strncpy(m.name, name, sizeof m.name - 1);
  m.name[sizeof m.name - 1] = '\0';
  m.at_ns = now_ns();
  page_->count = n + 1;
}

void StepTimer::child_done() {
  if (!page_) return;
  ::munmap(page_, sizeof(ChildPage));
  page_ = nullptr;
  on_ = false;
}

void StepTimer::take_child_marks() {
  if (!on_ || !page_) return;
  uint32_t n = std::min<uint32_t>(page_->count, kMaxChildMarks);
  for (uint32_t i = 0; i < n; ++i) {
    const ChildMark& m = page_->marks[i];
    std::string name(m.name, ::strnlen(m.name, sizeof m.name));
    // Only marks inside this run's span count (the page is ours, but be strict).
    if (m.at_ns < origin_ns_ || name.empty()) continue;
    auto pos = std::upper_bound(marks_.begin(), marks_.end(), m.at_ns,
                                [](uint64_t t, const Mark& x) { return t < x.at_ns; });
    marks_.insert(pos, Mark{std::move(name), m.at_ns});
  }
  page_->count = 0;
}

std::vector<StepTimer::Step> StepTimer::steps() const {
  std::vector<Step> out;
  uint64_t prev = origin_ns_;
  for (const auto& m : marks_) {
    uint64_t d = m.at_ns > prev ? m.at_ns - prev : 0;
    prev = std::max(prev, m.at_ns);
    auto it = std::find_if(out.begin(), out.end(), [&](const Step& s) { return s.name == m.name; });
    if (it == out.end()) out.push_back({m.name, d});
    else it->ns += d;
  }
  return out;
}

uint64_t StepTimer::total_ns() const { return marks_.empty() ? 0 : marks_.back().at_ns - origin_ns_; }

std::string StepTimer::summary() const {
  std::string out;
  char b[96];
  for (const auto& s : steps()) {
    std::snprintf(b, sizeof b, "%.2f ms, ", static_cast<double>(s.ns) / 1e6);
    out += s.name + " " + b;
  }
  std::snprintf(b, sizeof b, "total %.2f ms", static_cast<double>(total_ns()) / 1e6);
  return out + b;
}

}  // namespace exg
