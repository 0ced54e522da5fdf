// A walk of a directory tree shared by a few threads: each directory is one
// task, visited by whichever thread takes it from a queue; a visit offers its
// subdirectories as new tasks. Listing a directory is kernel work that runs in
// parallel (ext4's hashed readdir is most of it), and a big tree (a monorepo's
// 15 000 files took the plan's walk 16 ms and the exit's set-id check 44 ms on
// one thread) is what a sandbox start and end wait for.
//
// A small tree (the usual workspace) never starts a thread: another joins only
// while more directories wait than the threads already walking can take. The
// queue is bounded: beyond it, the visit takes the subdirectory itself, depth
// first, so the descriptors held open stay bounded. run() returns with every
// thread joined (the process single-threaded again, as a later fork expects).
// A visit that throws (on any thread) ends the walk: the others finish the
// visit they are in, take nothing more, and run() rethrows the first error.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace exg {

template <typename Task>
class ParallelWalk {
 public:
  struct Limits {
    size_t max_threads = 4;        // this one included
    size_t queued_per_thread = 16;  // waiting tasks per walking thread before one more joins
    size_t max_queued = 512;        // beyond: offer() declines and the caller visits the task itself
  };

  ParallelWalk() = default;
  explicit ParallelWalk(Limits l) : lim_(l) {}
  ParallelWalk(const ParallelWalk&) = delete;
  ParallelWalk& operator=(const ParallelWalk&) = delete;

  // Visits root and every task offered meanwhile, on this thread and (for a
  // big tree) a few more; returns once all are visited and the threads joined.
  // visit(task) runs on any of the threads: what it shares, it guards.
  void run(Task root, std::function<void(Task&)> visit) {
    visit_ = std::move(visit);
    queue_.push_back(std::move(root));
    work();
    for (auto& t : threads_) t.join();
    threads_.clear();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  // From a visit: true when t was queued for any thread (t is moved from);
  // false when the queue is full, and the caller visits t itself.
  bool offer(Task& t) {
    std::unique_lock<std::mutex> l(m_);
    if (error_) {  // the walk is ending: nothing more to visit
      [[maybe_unused]] Task dropped = std::move(t);
      return true;
    }
    if (queue_.size() >= lim_.max_queued) return false;
    queue_.push_back(std::move(t));
    if (threads_.size() + 1 < lim_.max_threads && queue_.size() > lim_.queued_per_thread * (threads_.size() + 1)) {
      try {
        threads_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {  // no thread (EAGAIN): the ones there walk it all
      }
    }
    l.unlock();
    cv_.notify_one();
    return true;
  }

  // Before run(): at most n threads, this one included (1: no other).
  void set_max_threads(size_t n) { lim_.max_threads = n ? n : 1; }

  // Threads that joined in so far (tests).
  size_t extra_threads() const {
    std::lock_guard<std::mutex> l(m_);
    return threads_.size();
  }

 private:
  // Takes tasks until none waits and no thread is visiting one (a visit may
  // offer more).
  void work() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return !queue_.empty() || busy_ == 0; });
      if (queue_.empty()) return;
      Task t = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
      l.unlock();
      std::exception_ptr e;
      try {
        visit_(t);
      } catch (...) {
        e = std::current_exception();
      }
      { [[maybe_unused]] Task done = std::move(t); }  // ends here: its descriptor is closed before the lock is taken again
      l.lock();
      if (e && !error_) error_ = e;
      if (error_) queue_.clear();
      if (--busy_ == 0 && queue_.empty()) cv_.notify_all();
    }
  }

  Limits lim_;
  std::function<void(Task&)> visit_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  size_t busy_ = 0;
  std::vector<std::thread> threads_;
  std::exception_ptr error_;  // the first visit's exception; guarded by m_
};

}  // namespace exg
