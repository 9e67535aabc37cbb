//! How many password verifications per second this machine does with Berth's
//! own hashing code: the ceiling for sign-ins that miss the credential cache.
//!
//! `cargo run --release -p berth-auth --example hash_rate -- [threads] [seconds]`
//! prints `<threads> <verifications> <seconds> <per second>`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use berth_auth::password::{hash_password, verify_password};

fn main() {
    let mut args = std::env::args().skip(1);
    let threads: usize = args.next().map_or(1, |a| a.parse().expect("threads"));
    let seconds: f64 = args.next().map_or(5.0, |a| a.parse().expect("seconds"));
    let stored = hash_password("the right password");
    let done = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    assert!(!verify_password("a wrong password", &stored));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed);
    println!("{threads} {n} {elapsed:.2} {:.1}", n as f64 / elapsed);
}
