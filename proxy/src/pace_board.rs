//! The workers' shared board of client paces: each worker's core learns how long its clients
//! take to complete a handshake (the handshake rescue, `ProxyCore::poll_pace_lesson`), and the
//! capture hands a client's connections to workers by their four-tuple, so its next connection
//! may land on another worker. Lessons are rare (one per completed handshake at most), so a
//! mutex guards the log; a worker that finds the post count unchanged takes no lock.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use sidekick_proxy_core::core::PaceLesson;

/// Lessons kept on the board; a worker that falls further behind misses the oldest (each lesson
/// missed costs at most one spurious replay round).
const BOARD_LESSONS: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Posted {
    seq: u64,
    from: usize,
    lesson: PaceLesson,
}

/// Client paces posted by the workers, read by the others.
///
/// Call order per worker turn: [`PaceBoard::post`] with what the core put out, then
/// [`PaceBoard::read_new`] with the worker's own read mark.
///
/// ```
/// use sidekick_proxy::pace_board::PaceBoard;
/// use sidekick_proxy_core::core::PaceLesson;
/// use std::time::Duration;
///
/// let board = PaceBoard::default();
/// let lesson = PaceLesson { client: "10.0.2.2".parse().unwrap(), extra: Duration::from_millis(5) };
/// board.post(0, [lesson]);
/// let (mut seen0, mut seen1) = (0, 0);
/// let mut got = Vec::new();
/// board.read_new(1, &mut seen1, |l| got.push(l));
/// assert_eq!(got, [lesson]);
/// // A worker never reads its own lessons back.
/// board.read_new(0, &mut seen0, |_| unreachable!());
/// ```
#[derive(Debug, Default)]
pub struct PaceBoard {
    /// Lessons ever posted.
    posted: AtomicU64,
    log: Mutex<VecDeque<Posted>>,
}

impl PaceBoard {
    /// Posts worker `from`'s lessons.
    pub fn post(&self, from: usize, lessons: impl IntoIterator<Item = PaceLesson>) {
        let mut lessons = lessons.into_iter().peekable();
        if lessons.peek().is_none() {
            return;
        }
        let Ok(mut log) = self.log.lock() else {
            return;
        };
        for lesson in lessons {
            let seq = self.posted.load(Ordering::Relaxed) + 1;
            if log.len() >= BOARD_LESSONS {
                log.pop_front();
            }
            log.push_back(Posted { seq, from, lesson });
            self.posted.store(seq, Ordering::Release);
        }
    }

    /// Hands `f` the lessons of other workers posted since `seen` (worker `me`'s read mark,
    /// starting at 0) and advances the mark.
    pub fn read_new(&self, me: usize, seen: &mut u64, mut f: impl FnMut(PaceLesson)) {
        if self.posted.load(Ordering::Acquire) == *seen {
            return;
        }
        let Ok(log) = self.log.lock() else {
            return;
        };
        let since = *seen;
        for p in log.iter().filter(|p| p.seq > since) {
            if p.from != me {
                f(p.lesson);
            }
            *seen = p.seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn lesson(host: u8, ms: u64) -> PaceLesson {
        PaceLesson {
            client: std::net::IpAddr::from([10, 0, 2, host]),
            extra: Duration::from_millis(ms),
        }
    }

    #[test]
    fn each_worker_reads_the_others_lessons_once() {
        let board = PaceBoard::default();
        let mut seen = [0u64; 3];
        board.post(0, [lesson(1, 3), lesson(2, 4)]);
        board.post(2, [lesson(3, 5)]);
        let read = |me: usize, seen: &mut u64| {
            let mut v = Vec::new();
            board.read_new(me, seen, |l| v.push(l));
            v
        };
        assert_eq!(
            read(1, &mut seen[1]),
            [lesson(1, 3), lesson(2, 4), lesson(3, 5)]
        );
        assert_eq!(read(0, &mut seen[0]), [lesson(3, 5)]);
        assert_eq!(read(2, &mut seen[2]), [lesson(1, 3), lesson(2, 4)]);
        for (me, s) in seen.iter_mut().enumerate() {
            assert!(read(me, s).is_empty());
        }
    }

    #[test]
    fn a_worker_far_behind_misses_only_the_oldest() {
        let board = PaceBoard::default();
        for i in 0..(BOARD_LESSONS as u64 + 10) {
            board.post(0, [lesson(1, i)]);
        }
        let (mut seen, mut n, mut first) = (0, 0, None);
        board.read_new(1, &mut seen, |l| {
            n += 1;
            first.get_or_insert(l.extra);
        });
        assert_eq!(n, BOARD_LESSONS);
        assert_eq!(first, Some(Duration::from_millis(10)));
        assert_eq!(seen, BOARD_LESSONS as u64 + 10);
    }
}
