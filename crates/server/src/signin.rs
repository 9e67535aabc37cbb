//! Sign-in protection shared by every surface: who the client is (the socket
//! peer, or `X-Forwarded-For` behind a trusted proxy) and the throttle of
//! failed password sign-ins that runs before any password is hashed.
//!
//! The throttle counts failures in fixed windows that start at a key's first
//! failure, under three keys:
//!
//! - **(account, address)**: one client guessing one account's password;
//! - **address**: one client guessing across many accounts;
//! - **account**, across all addresses: an account under a distributed attack.
//!   This key never refuses anyone by itself: while it is over its limit, the
//!   (account, address) limit drops to one failure, so every address that
//!   already failed on that account waits for its window to end, while an
//!   address that has not failed (the owner, elsewhere) still signs in.
//!
//! No key locks an account for everyone: the owner, from an address that is
//! not guessing, always gets through. A successful sign-in clears its
//! (account, address) key. The state lives in memory, per instance, in
//! bounded maps.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::{Extensions, HeaderMap};
use sha2::{Digest, Sha256};

use crate::units::parse_duration_secs;

/// The throttle's numbers. A limit of 0 means no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottleLimits {
    /// Failures one address may make on one account in a window.
    pub account_address: u32,
    /// Failures one address may make over all accounts in a window.
    pub address: u32,
    /// Failures on one account, from all addresses, past which each address
    /// gets one failure per window on it.
    pub account: u32,
    /// The window: counting starts at a key's first failure and ends this long after.
    pub window: Duration,
}

impl Default for ThrottleLimits {
    fn default() -> Self {
        Self {
            account_address: 5,
            address: 20,
            account: 100,
            window: Duration::from_secs(15 * 60),
        }
    }
}

impl ThrottleLimits {
    /// No throttling at all.
    pub const OFF: Self = Self {
        account_address: 0,
        address: 0,
        account: 0,
        window: Duration::from_secs(0),
    };
}

impl FromStr for ThrottleLimits {
    type Err = String;

    /// `off`, or comma-separated `key=value` pairs over the defaults:
    /// `account-address=5,address=20,account=100,window=15m`.
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("off") {
            return Ok(Self::OFF);
        }
        let mut limits = Self::default();
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not key=value"))?;
            let count = || {
                value
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| format!("`{value}` is not a count"))
            };
            match key.trim() {
                "account-address" => limits.account_address = count()?,
                "address" => limits.address = count()?,
                "account" => limits.account = count()?,
                "window" => {
                    let secs = parse_duration_secs(value)?;
                    limits.window = Duration::from_secs(secs.max(1).unsigned_abs());
                }
                other => {
                    return Err(format!(
                        "unknown key `{other}` (account-address, address, account, window)"
                    ));
                }
            }
        }
        Ok(limits)
    }
}

/// Addresses whose `X-Forwarded-For` is believed: reverse proxies in front of Berth.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl FromStr for TrustedProxies {
    type Err = String;

    /// A comma-separated list of addresses and CIDR blocks (`10.0.0.0/8,127.0.0.1,::1`);
    /// empty trusts none.
    fn from_str(text: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (addr, bits) = match item.split_once('/') {
                Some((addr, bits)) => (addr, Some(bits)),
                None => (item, None),
            };
            let addr: IpAddr = addr
                .parse()
                .map_err(|_| format!("`{item}` is not an address or CIDR block"))?;
            let max = if addr.is_ipv4() { 32 } else { 128 };
            let bits = match bits {
                None => max,
                Some(bits) => bits
                    .parse::<u8>()
                    .ok()
                    .filter(|b| *b <= max)
                    .ok_or_else(|| format!("`{item}` has a bad prefix length"))?,
            };
            nets.push((canonical(addr), bits));
        }
        Ok(Self(nets))
    }
}

impl TrustedProxies {
    /// Whether `addr` is one of the trusted proxies.
    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = canonical(addr);
        self.0
            .iter()
            .any(|(net, bits)| prefix(*net, *bits) == prefix(addr, *bits))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The first `bits` bits of `addr`, the rest zero; `None` across families.
fn prefix(addr: IpAddr, bits: u8) -> Option<IpAddr> {
    match addr {
        IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(bits.min(32)))
                .unwrap_or(0);
            Some(IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask)))
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(bits.min(128)))
                .unwrap_or(0);
            Some(IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask)))
        }
    }
}

/// The header a reverse proxy names the client in.
pub const X_FORWARDED_FOR: &str = "x-forwarded-for";

/// The socket peer of a request served from a listener (absent in process).
pub fn peer(extensions: &Extensions) -> Option<SocketAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| *addr)
}

/// The client address of a request: the socket peer; when the peer is a
/// trusted proxy, the rightmost `X-Forwarded-For` hop that is not one. A
/// request without a peer (served in process, in tests) is `0.0.0.0`.
pub fn client_address(
    proxies: &TrustedProxies,
    peer: Option<SocketAddr>,
    headers: &HeaderMap,
) -> IpAddr {
    let Some(peer) = peer else {
        return IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    };
    let mut client = canonical(peer.ip());
    if !proxies.contains(client) {
        return client;
    }
    let hops: Vec<&str> = headers
        .get_all(X_FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    for hop in hops.iter().rev() {
        // A hop that is not an address ends what can be believed: the proxy
        // that appended it is the last one we know of.
        let Ok(addr) = hop.parse::<IpAddr>() else {
            return client;
        };
        client = canonical(addr);
        if !proxies.contains(client) {
            return client;
        }
    }
    client
}

/// One key's failures in its current window.
#[derive(Debug, Clone, Copy)]
struct Window {
    failures: u32,
    started: Instant,
}

type AccountKey = [u8; 16];

#[derive(Debug, Default)]
struct Counters {
    pairs: HashMap<(IpAddr, AccountKey), Window>,
    addresses: HashMap<IpAddr, Window>,
    accounts: HashMap<AccountKey, Window>,
}

/// A sign-in attempt counted as failed until [`Throttle::succeeded`] says otherwise.
#[derive(Debug)]
#[must_use = "an attempt that succeeded must be reported"]
pub struct Attempt {
    address: IpAddr,
    account: AccountKey,
}

/// The in-memory throttle of failed sign-ins (see the module documentation).
#[derive(Debug)]
pub struct Throttle {
    limits: ThrottleLimits,
    capacity: usize,
    /// Nanoseconds this throttle's clock runs ahead of the monotonic clock
    /// (moved only by tests, [`Throttle::advance_clock`]).
    ahead_nanos: AtomicU64,
    counters: Mutex<Counters>,
    /// Slow verifications of one (account, address) run one at a time, so
    /// concurrent guesses cannot all pass the check before the first failure
    /// is counted; concurrent correct sign-ins wait for the first and then
    /// find it in the credential cache.
    turns: Vec<tokio::sync::Mutex<()>>,
}

/// How many (account, address) keys share a turn lock.
const TURN_STRIPES: usize = 256;

impl Throttle {
    /// A throttle with `limits`, keeping at most `capacity` keys of each kind.
    pub fn new(limits: ThrottleLimits, capacity: usize) -> Self {
        Self {
            limits,
            capacity: capacity.max(2),
            ahead_nanos: AtomicU64::new(0),
            counters: Mutex::new(Counters::default()),
            turns: (0..TURN_STRIPES)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
        }
    }

    /// The numbers in effect.
    pub fn limits(&self) -> ThrottleLimits {
        self.limits
    }

    /// Moves this throttle's clock on by `by`, so tests can end a window without sleeping.
    pub fn advance_clock(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.ahead_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.ahead_nanos.load(Ordering::Relaxed))
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err(seconds to wait)` when `login` from `address` is refused now.
    pub fn check(&self, address: IpAddr, login: &str) -> Result<(), u32> {
        let key = (address_key(address), account_key(login));
        let now = self.now();
        let counters = self.counters();
        self.refusal(&counters, key, now).map_or(Ok(()), Err)
    }

    /// Waits for this (account, address)'s turn at the slow verification.
    pub async fn turn(&self, address: IpAddr, login: &str) -> tokio::sync::MutexGuard<'_, ()> {
        let mut hasher = std::hash::DefaultHasher::new();
        (address_key(address), account_key(login)).hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % TURN_STRIPES as u64).unwrap_or(0);
        self.turns[stripe].lock().await
    }

    /// Checks again and counts an attempt as a failure of all three keys
    /// before it is verified, so that an attempt whose client goes away still
    /// counts; `Err(seconds to wait)` when refused.
    pub fn begin(&self, address: IpAddr, login: &str) -> Result<Attempt, u32> {
        let (address, account) = (address_key(address), account_key(login));
        let now = self.now();
        let mut counters = self.counters();
        if let Some(wait) = self.refusal(&counters, (address, account), now) {
            return Err(wait);
        }
        let (window, capacity) = (self.limits.window, self.capacity);
        bump(
            &mut counters.pairs,
            (address, account),
            now,
            window,
            capacity,
        );
        bump(&mut counters.addresses, address, now, window, capacity);
        bump(&mut counters.accounts, account, now, window, capacity);
        Ok(Attempt { address, account })
    }

    /// The attempt did not fail (it succeeded, or could not be decided because
    /// a dependency failed): take back what [`Throttle::begin`] counted; a
    /// success also clears its (account, address) key.
    pub fn settle(&self, attempt: Attempt, succeeded: bool) {
        let mut counters = self.counters();
        let pair = (attempt.address, attempt.account);
        if succeeded {
            counters.pairs.remove(&pair);
        } else {
            unbump(&mut counters.pairs, &pair);
        }
        unbump(&mut counters.addresses, &attempt.address);
        unbump(&mut counters.accounts, &attempt.account);
    }

    /// The seconds to wait when a key is over its limit now.
    fn refusal(
        &self,
        counters: &Counters,
        (address, account): (IpAddr, AccountKey),
        now: Instant,
    ) -> Option<u32> {
        let limits = self.limits;
        let live = |w: Option<&Window>| w.copied().filter(|w| now - w.started < limits.window);
        let over = |w: Option<Window>, limit: u32| w.filter(|w| limit > 0 && w.failures >= limit);
        let pair = live(counters.pairs.get(&(address, account)));
        let under_attack = over(live(counters.accounts.get(&account)), limits.account).is_some();
        let pair_limit = if under_attack && limits.account_address > 0 {
            1
        } else {
            limits.account_address
        };
        [
            over(pair, pair_limit),
            over(live(counters.addresses.get(&address)), limits.address),
        ]
        .into_iter()
        .flatten()
        .map(|w| {
            let left = limits.window.saturating_sub(now - w.started);
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            u32::try_from(secs).unwrap_or(u32::MAX)
        })
        .max()
        .map(|secs| secs.max(1))
    }
}

/// Counts one failure of `key`, starting a new window when the last one ended.
fn bump<K: Hash + Eq>(
    map: &mut HashMap<K, Window>,
    key: K,
    now: Instant,
    window: Duration,
    capacity: usize,
) {
    if !map.contains_key(&key) && map.len() >= capacity {
        make_room(map, now, window, capacity);
    }
    let entry = map.entry(key).or_insert(Window {
        failures: 0,
        started: now,
    });
    if now - entry.started >= window {
        *entry = Window {
            failures: 0,
            started: now,
        };
    }
    entry.failures = entry.failures.saturating_add(1);
}

/// Takes back one failure of `key`.
fn unbump<K: Hash + Eq>(map: &mut HashMap<K, Window>, key: &K) {
    if let Some(entry) = map.get_mut(key) {
        entry.failures = entry.failures.saturating_sub(1);
    }
}

/// Drops ended windows; if the map is still full, the older half of the rest
/// (the keys closest to the end of their window).
fn make_room<K: Hash + Eq>(
    map: &mut HashMap<K, Window>,
    now: Instant,
    window: Duration,
    capacity: usize,
) {
    map.retain(|_, w| now - w.started < window);
    if map.len() < capacity {
        return;
    }
    let mut starts: Vec<Instant> = map.values().map(|w| w.started).collect();
    let middle = starts.len() / 2;
    let (_, median, _) = starts.select_nth_unstable(middle);
    let median = *median;
    map.retain(|_, w| w.started > median);
}

/// The address a key counts under: IPv6 clients by their /64, which one
/// client usually holds whole.
fn address_key(addr: IpAddr) -> IpAddr {
    match canonical(addr) {
        v6 @ IpAddr::V6(_) => prefix(v6, 64).unwrap_or(v6),
        v4 => v4,
    }
}

/// The account a key counts under: the login as sent, trimmed and
/// lower-cased (as it is looked up), hashed to a fixed size.
fn account_key(login: &str) -> AccountKey {
    let digest = Sha256::digest(login.trim().to_lowercase().as_bytes());
    let mut key = [0; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// Sign-in protection settings: the throttle's numbers, the trusted proxies
/// and how often an OIDC user's refresh token is checked.
#[derive(Debug, Clone)]
pub struct SignInSettings {
    /// The throttle's numbers.
    pub limits: ThrottleLimits,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// How long the OpenID provider's acceptance of a user's refresh token
    /// is trusted before a CLI secret makes Berth ask it again.
    pub oidc_token_check: Duration,
}

/// How often a CLI secret asks the provider about its user by default.
pub const OIDC_TOKEN_CHECK: Duration = Duration::from_secs(5 * 60);

impl Default for SignInSettings {
    fn default() -> Self {
        Self {
            limits: ThrottleLimits::default(),
            trusted_proxies: TrustedProxies::default(),
            oidc_token_check: OIDC_TOKEN_CHECK,
        }
    }
}

/// How many keys of each kind the throttle keeps at most.
const THROTTLE_CAPACITY: usize = 100_000;

/// The sign-in protection of one instance.
#[derive(Debug)]
pub struct SignInGuard {
    /// The throttle of failed sign-ins.
    pub throttle: Throttle,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: TrustedProxies,
    /// See [`SignInSettings::oidc_token_check`].
    pub oidc_token_check: Duration,
}

impl SignInGuard {
    /// A guard with `settings` and empty counters.
    pub fn new(settings: SignInSettings) -> Self {
        Self {
            throttle: Throttle::new(settings.limits, THROTTLE_CAPACITY),
            trusted_proxies: settings.trusted_proxies,
            oidc_token_check: settings.oidc_token_check,
        }
    }

    /// The client address of a request (see [`client_address`]).
    pub fn client(&self, extensions: &Extensions, headers: &HeaderMap) -> IpAddr {
        client_address(&self.trusted_proxies, peer(extensions), headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn limits(account_address: u32, address: u32, account: u32) -> ThrottleLimits {
        ThrottleLimits {
            account_address,
            address,
            account,
            window: Duration::from_secs(60),
        }
    }

    fn fail(throttle: &Throttle, address: &str, login: &str) -> Result<(), u32> {
        throttle.begin(ip(address), login).map(|_| ())
    }

    #[test]
    fn limits_parse() {
        assert_eq!("".parse::<ThrottleLimits>(), Ok(ThrottleLimits::default()));
        assert_eq!("off".parse::<ThrottleLimits>(), Ok(ThrottleLimits::OFF));
        let parsed: ThrottleLimits = "account-address=3, window=1h".parse().unwrap();
        assert_eq!(parsed.account_address, 3);
        assert_eq!(parsed.address, 20);
        assert_eq!(parsed.window, Duration::from_secs(3600));
        assert!("pairs=3".parse::<ThrottleLimits>().is_err());
        assert!("address=x".parse::<ThrottleLimits>().is_err());
        assert!("address".parse::<ThrottleLimits>().is_err());
    }

    #[test]
    fn proxies_parse_and_match() {
        let proxies: TrustedProxies = "10.0.0.0/8, 127.0.0.1,::1,fd00::/8".parse().unwrap();
        assert!(proxies.contains(ip("10.1.2.3")));
        assert!(proxies.contains(ip("127.0.0.1")));
        assert!(proxies.contains(ip("::ffff:127.0.0.1")));
        assert!(!proxies.contains(ip("127.0.0.2")));
        assert!(proxies.contains(ip("fd12::1")));
        assert!(!proxies.contains(ip("11.0.0.1")));
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
        assert!("proxy".parse::<TrustedProxies>().is_err());
        assert_eq!("".parse::<TrustedProxies>(), Ok(TrustedProxies::default()));
        let all: TrustedProxies = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("8.8.8.8")));
    }

    fn request(peer: Option<&str>, forwarded: Option<&str>) -> (Extensions, HeaderMap) {
        let mut extensions = Extensions::new();
        if let Some(peer) = peer {
            extensions.insert(ConnectInfo(SocketAddr::new(ip(peer), 4000)));
        }
        let mut headers = HeaderMap::new();
        if let Some(forwarded) = forwarded {
            headers.insert("x-forwarded-for", forwarded.parse().unwrap());
        }
        (extensions, headers)
    }

    #[test]
    fn the_client_is_the_peer_unless_it_is_a_trusted_proxy() {
        let proxies: TrustedProxies = "10.0.0.0/8".parse().unwrap();
        let client = |peer, forwarded| {
            let (extensions, headers) = request(peer, forwarded);
            client_address(&proxies, super::peer(&extensions), &headers)
        };
        assert_eq!(client(None, Some("1.2.3.4")), ip("0.0.0.0"));
        assert_eq!(client(Some("5.6.7.8"), Some("1.2.3.4")), ip("5.6.7.8"));
        assert_eq!(client(Some("10.0.0.1"), Some("1.2.3.4")), ip("1.2.3.4"));
        // A client cannot choose its address by prepending hops.
        assert_eq!(
            client(Some("10.0.0.1"), Some("9.9.9.9, 1.2.3.4, 10.0.0.2")),
            ip("1.2.3.4")
        );
        assert_eq!(client(Some("10.0.0.1"), None), ip("10.0.0.1"));
        assert_eq!(
            client(Some("10.0.0.1"), Some("junk, 10.0.0.2")),
            ip("10.0.0.2")
        );
        let none = TrustedProxies::default();
        let (extensions, headers) = request(Some("10.0.0.1"), Some("1.2.3.4"));
        assert_eq!(
            client_address(&none, super::peer(&extensions), &headers),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_pair_is_refused_after_its_limit_until_the_window_ends() {
        let throttle = Throttle::new(limits(3, 100, 100), 1000);
        for _ in 0..3 {
            assert!(fail(&throttle, "1.1.1.1", "alice").is_ok());
        }
        let wait = throttle.check(ip("1.1.1.1"), "ALICE ").unwrap_err();
        assert!((59..=60).contains(&wait), "{wait}");
        assert!(fail(&throttle, "1.1.1.1", "alice").is_err());
        assert!(
            throttle.check(ip("2.2.2.2"), "alice").is_ok(),
            "another address"
        );
        assert!(
            throttle.check(ip("1.1.1.1"), "bob").is_ok(),
            "another account"
        );
        throttle.advance_clock(Duration::from_secs(60));
        assert!(throttle.check(ip("1.1.1.1"), "alice").is_ok());
    }

    #[test]
    fn an_address_is_refused_across_accounts() {
        let throttle = Throttle::new(limits(100, 3, 100), 1000);
        for login in ["a", "b", "c"] {
            assert!(fail(&throttle, "1.1.1.1", login).is_ok());
        }
        assert!(throttle.check(ip("1.1.1.1"), "d").is_err());
        assert!(throttle.check(ip("1.1.1.2"), "d").is_ok());
    }

    #[test]
    fn ipv6_clients_count_by_their_64() {
        let throttle = Throttle::new(limits(2, 100, 100), 1000);
        assert!(fail(&throttle, "2001:db8::1", "alice").is_ok());
        assert!(fail(&throttle, "2001:db8::2", "alice").is_ok());
        assert!(throttle.check(ip("2001:db8::3"), "alice").is_err());
        assert!(throttle.check(ip("2001:db8:0:1::1"), "alice").is_ok());
    }

    #[test]
    fn an_account_under_attack_slows_only_the_addresses_that_failed_on_it() {
        let throttle = Throttle::new(limits(5, 100, 3), 1000);
        for address in ["1.0.0.1", "1.0.0.2", "1.0.0.3"] {
            assert!(fail(&throttle, address, "alice").is_ok());
        }
        assert!(throttle.check(ip("1.0.0.1"), "alice").is_err());
        assert!(throttle.check(ip("9.9.9.9"), "alice").is_ok(), "the owner");
        let attempt = throttle.begin(ip("9.9.9.9"), "alice").unwrap();
        throttle.settle(attempt, true);
        assert!(throttle.check(ip("9.9.9.9"), "alice").is_ok());
    }

    #[test]
    fn a_success_takes_its_attempt_back_and_clears_its_pair() {
        let throttle = Throttle::new(limits(2, 2, 100), 1000);
        assert!(fail(&throttle, "1.1.1.1", "alice").is_ok());
        for _ in 0..5 {
            let attempt = throttle.begin(ip("1.1.1.1"), "alice").unwrap();
            throttle.settle(attempt, true);
        }
        assert!(fail(&throttle, "1.1.1.1", "alice").is_ok());
        assert!(
            throttle.check(ip("1.1.1.1"), "bob").is_err(),
            "the address failed twice"
        );
    }

    #[test]
    fn off_never_refuses() {
        let throttle = Throttle::new(ThrottleLimits::OFF, 1000);
        for _ in 0..50 {
            assert!(fail(&throttle, "1.1.1.1", "alice").is_ok());
        }
    }

    #[test]
    fn the_maps_stay_bounded() {
        let throttle = Throttle::new(limits(5, 5, 5), 10);
        for i in 0..200u32 {
            let address = IpAddr::V4(Ipv4Addr::from(i));
            let _ = throttle.begin(address, &format!("user{i}"));
        }
        let counters = throttle.counters();
        assert!(counters.pairs.len() <= 10, "{}", counters.pairs.len());
        assert!(counters.addresses.len() <= 10);
        assert!(counters.accounts.len() <= 10);
    }
}
