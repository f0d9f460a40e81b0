//! [`DeviceRegistry`]: paired devices, pending pairing requests and pair tickets, in the
//! hub-only database `hub.db`.
//!
//! The one API for every path that touches devices: the pairing handler, the handshake
//! hook, the `hearth-hub devices …` commands (which may run while the hub runs: SQLite
//! serialises them) and the HTTP API. Codes are 8 characters from an alphabet without
//! vowels or look-alikes, live 15 minutes, are single use; requests and wrong approvals
//! are rate limited. Requests are limited per key, per address ([`Origin`]) and overall,
//! so one host cannot use up the overall budget; a ticket is reserved by the first key
//! that starts with it, so one ticket pairs one device. This module never does network
//! I/O and trusts nothing a requesting device says about itself beyond its name.

use std::{
    net::IpAddr,
    path::{Path, PathBuf},
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use iroh::EndpointId;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// RFC 8628's suggested user-code alphabet: consonants only, no look-alikes.
const ALPHABET: &[u8; 20] = b"BCDFGHJKLMNPQRSTVWXZ";
/// How long a code may wait for the owner.
pub const CODE_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// How long a pair ticket stays valid.
pub const TICKET_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
const WINDOW_MS: i64 = 10 * 60 * 1000;
const MAX_REQUESTS_PER_PEER: i64 = 5;
/// Requests per direct address (IPv4 address or IPv6 /64) per window: well under the
/// overall budget, so one host cannot use it all up.
const MAX_REQUESTS_PER_ADDR: i64 = 10;
/// Requests that came through relays, together, per window. A relayed connection has no
/// remote IP (the relay forwards it), so these share one larger bucket: a flood through
/// relays cannot use up the budget of devices on the LAN, and one relay user cannot lock
/// out everyone else behind the same relay beyond this bucket.
const MAX_REQUESTS_VIA_RELAY: i64 = 30;
const MAX_REQUESTS_OVERALL: i64 = 60;
const WRONG_CODE_WINDOW_MS: i64 = 60 * 1000;
const MAX_WRONG_CODES: i64 = 10;

/// Why a device operation failed. Every variant's text is meant for the user.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeviceError {
    /// The database failed.
    #[error("device database: {0}")]
    Db(#[from] rusqlite::Error),
    /// `hub.db` cannot be used (e.g. it is from a newer release).
    #[error(transparent)]
    HubDb(#[from] crate::hubdb::HubDbError),
    /// No pending request has this code (says nothing about which codes exist).
    #[error("no pairing request has code {0}: check the code shown on the device")]
    WrongCode(String),
    /// The code expired.
    #[error("code {0} expired (codes last 15 minutes): run `hearth pair` on the device again")]
    Expired(String),
    /// The code was already used.
    #[error("code {0} was already used")]
    Used(String),
    /// The code was denied.
    #[error("code {0} was denied")]
    Denied(String),
    /// Too many attempts.
    #[error("too many attempts: try again in {retry_after_secs} s")]
    Throttled {
        /// Seconds to wait.
        retry_after_secs: u32,
    },
    /// The pair ticket is unknown, expired or used.
    #[error(
        "this pair ticket is expired or already used: print a new one with `hearth-hub ticket`"
    )]
    BadTicket,
    /// The hub requires a ticket to pair.
    #[error("this hub pairs only through a ticket: ask its owner for `hearth-hub ticket`")]
    TicketRequired,
    /// The code belongs to another key than the one the owner was shown.
    #[error("code {code} belongs to the device with fingerprint {fingerprint}, not the one you checked: nothing was approved")]
    Mismatch {
        /// The code.
        code: String,
        /// The fingerprint of the key that asked with it.
        fingerprint: String,
    },
    /// No such device.
    #[error("no device {0}")]
    NoDevice(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// The system's randomness failed.
    #[error("no randomness: {0}")]
    Random(String),
}

/// Where a pairing request came from, as the hub's transport saw it (never as the peer
/// claims): the bucket its rate limits count in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A direct path from this IP address.
    Direct(IpAddr),
    /// Through a relay (or a transport without an IP): no address to count by.
    Relayed,
}

impl Origin {
    /// The rate-limit bucket: an IPv4 address, an IPv6 /64 (one host usually owns a whole
    /// /64, so counting single IPv6 addresses would limit nothing), or `relay`.
    pub fn bucket(&self) -> String {
        match self {
            Origin::Direct(IpAddr::V4(v4)) => format!("ip4:{v4}"),
            Origin::Direct(IpAddr::V6(v6)) => match v6.to_ipv4_mapped() {
                Some(v4) => format!("ip4:{v4}"),
                None => {
                    let s = v6.segments();
                    format!("ip6:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
                }
            },
            Origin::Relayed => "relay".to_string(),
        }
    }

    fn max_requests(&self) -> i64 {
        match self {
            Origin::Direct(_) => MAX_REQUESTS_PER_ADDR,
            Origin::Relayed => MAX_REQUESTS_VIA_RELAY,
        }
    }
}

/// What a `Start` leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartOutcome {
    /// The key is already a paired, unrevoked device: nothing to approve; its scope.
    AlreadyPaired {
        /// The device's project scope (`None`: everything).
        scope: Option<String>,
    },
    /// A request waits for the owner (new, or the key's pending one).
    Pending(PendingRequest),
}

/// A paired device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Its node id.
    pub node_id: String,
    /// Display name.
    pub name: String,
    /// Project subtree it may replicate, if scoped.
    pub scope: Option<String>,
    /// When it was paired, ms.
    pub paired_at: i64,
    /// When it last connected or disconnected, ms.
    pub last_seen: Option<i64>,
    /// When it was revoked, ms.
    pub revoked_at: Option<i64>,
    /// Whether it has a session open with the running hub.
    pub online: bool,
    /// Whether the owner lets it widen power through the relay (approve devices, set
    /// provider keys, tool permissions, secrets, settings). Set by the owner only.
    pub admin: bool,
}

/// What a paired, unrevoked device may do now: read for every relayed request, never
/// remembered from when it connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The project subtree it may reach (`None`: everything).
    pub scope: Option<String>,
    /// Whether it may widen power.
    pub admin: bool,
}

/// A pairing request waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingRequest {
    /// The user code.
    pub code: String,
    /// The requesting node.
    pub node_id: String,
    /// The name it gave.
    pub device_name: String,
    /// When it asked, ms.
    pub created_at: i64,
    /// When the code expires, ms.
    pub expires_at: i64,
    /// Short fingerprint of the requesting key (`hearth_net::fingerprint`), as the
    /// device's `hearth pair` prints it.
    pub fingerprint: String,
    /// The key was paired once and revoked: the owner should know before approving.
    pub previously_revoked: bool,
}

/// The state of a pairing request, as its node's poll sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollState {
    /// Waiting for the owner.
    Pending,
    /// Approved, with the scope.
    Approved(Option<String>),
    /// Denied.
    Denied,
    /// Expired.
    Expired,
}

/// A row of `pair_requests` as a decision reads it.
struct RequestRow {
    node_id: String,
    device_name: String,
    state: String,
    expires_at: i64,
    ticket: Option<Vec<u8>>,
}

/// The device registry on `hub.db`.
#[derive(Debug)]
pub struct DeviceRegistry {
    conn: Mutex<Connection>,
    path: PathBuf,
}

use crate::hubdb::now_ms;

/// Normalises what a person typed: case, spaces and hyphens do not matter.
pub fn normalize_code(input: &str) -> String {
    input
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

fn format_code(raw: &str) -> String {
    if raw.len() == 8 {
        format!("{}-{}", &raw[..4], &raw[4..])
    } else {
        raw.to_string()
    }
}

fn random_bytes<const N: usize>() -> Result<[u8; N], DeviceError> {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).map_err(|e| DeviceError::Random(e.to_string()))?;
    Ok(b)
}

fn new_code() -> Result<String, DeviceError> {
    // Rejection sampling keeps every letter equally likely.
    let mut out = String::with_capacity(8);
    while out.len() < 8 {
        for b in random_bytes::<16>()? {
            if b < 240 && out.len() < 8 {
                out.push(ALPHABET[(b % 20) as usize] as char);
            }
        }
    }
    Ok(out)
}

/// Columns [`pending_from_row`] reads, over `pair_requests r LEFT JOIN devices d`.
const PENDING_COLUMNS: &str = "r.code, r.node_id, r.device_name, r.created_at, r.expires_at,
    d.revoked_at IS NOT NULL";

fn pending_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PendingRequest> {
    let node_id: String = r.get(1)?;
    Ok(PendingRequest {
        code: r.get(0)?,
        fingerprint: hearth_net::fingerprint_of_id(&node_id).unwrap_or_else(|| "?".into()),
        node_id,
        device_name: r.get(2)?,
        created_at: r.get(3)?,
        expires_at: r.get(4)?,
        previously_revoked: r.get::<_, Option<bool>>(5)?.unwrap_or(false),
    })
}

fn device_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Device> {
    Ok(Device {
        node_id: r.get(0)?,
        name: r.get(1)?,
        scope: r.get(2)?,
        paired_at: r.get(3)?,
        last_seen: r.get(4)?,
        revoked_at: r.get(5)?,
        online: r.get(6)?,
        admin: r.get(7)?,
    })
}

impl DeviceRegistry {
    /// Opens (creating) the registry at `path`.
    pub fn open(path: &Path) -> Result<Self, DeviceError> {
        let conn = crate::hubdb::open(path, crate::hubdb::Durability::Full)?;
        Ok(Self {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `node` is paired and not revoked.
    pub fn is_allowed(&self, node: &EndpointId) -> Result<bool, DeviceError> {
        let conn = self.lock();
        let ok: Option<i64> = conn
            .query_row(
                "SELECT 1 FROM devices WHERE node_id = ?1 AND revoked_at IS NULL",
                [node.to_string()],
                |r| r.get(0),
            )
            .optional()?;
        Ok(ok.is_some())
    }

    /// Whether `node` was paired once and has been revoked.
    pub fn is_revoked(&self, node: &EndpointId) -> Result<bool, DeviceError> {
        let conn = self.lock();
        let r: Option<i64> = conn
            .query_row(
                "SELECT 1 FROM devices WHERE node_id = ?1 AND revoked_at IS NOT NULL",
                [node.to_string()],
                |r| r.get(0),
            )
            .optional()?;
        Ok(r.is_some())
    }

    /// The scope of an allowed device (`None`: everything).
    pub fn scope_of(&self, node: &EndpointId) -> Result<Option<String>, DeviceError> {
        let conn = self.lock();
        Ok(conn
            .query_row(
                "SELECT scope FROM devices WHERE node_id = ?1 AND revoked_at IS NULL",
                [node.to_string()],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    /// What an allowed device may do now; `None` if it is not paired or is revoked.
    pub fn grant(&self, node: &EndpointId) -> Result<Option<Grant>, DeviceError> {
        let conn = self.lock();
        Ok(conn
            .query_row(
                "SELECT scope, admin FROM devices WHERE node_id = ?1 AND revoked_at IS NULL",
                [node.to_string()],
                |r| {
                    Ok(Grant {
                        scope: r.get(0)?,
                        admin: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    /// Records that `node` was seen now.
    pub fn touch(&self, node: &EndpointId) -> Result<(), DeviceError> {
        let conn = self.lock();
        conn.execute(
            "UPDATE devices SET last_seen = ?2 WHERE node_id = ?1",
            params![node.to_string(), now_ms()],
        )?;
        Ok(())
    }

    /// Records whether `node` has a session open now (the hub process is the only writer).
    pub fn set_online(&self, node: &EndpointId, online: bool) -> Result<(), DeviceError> {
        let conn = self.lock();
        conn.execute(
            "UPDATE devices SET online = ?2, last_seen = ?3 WHERE node_id = ?1",
            params![node.to_string(), online, now_ms()],
        )?;
        Ok(())
    }

    /// Marks every device offline (at hub start: no session survives a restart).
    pub fn reset_online(&self) -> Result<(), DeviceError> {
        self.lock().execute("UPDATE devices SET online = 0", [])?;
        Ok(())
    }

    /// Issues a pair ticket secret.
    pub fn issue_ticket(&self) -> Result<[u8; 16], DeviceError> {
        let secret = random_bytes::<16>()?;
        let now = now_ms();
        let conn = self.lock();
        conn.execute(
            "INSERT INTO tickets (secret, created_at, expires_at) VALUES (?1, ?2, ?3)",
            params![&secret[..], now, now + TICKET_LIFETIME.as_millis() as i64],
        )?;
        Ok(secret)
    }

    /// Answers a `Start` from `node`: a paired key learns its scope; otherwise opens a
    /// pairing request, or returns the key's pending one. Rate limited per key, per
    /// [`Origin`] bucket and overall; a ticket is reserved for `node` here, in the same
    /// transaction, so two keys racing with one ticket cannot both get a code (the ticket
    /// stays reserved if the owner denies the request: ask for a new one).
    pub fn start_pair(
        &self,
        node: &EndpointId,
        device_name: &str,
        ticket: Option<[u8; 16]>,
        require_ticket: bool,
        origin: Origin,
    ) -> Result<StartOutcome, DeviceError> {
        let name = device_name.trim();
        if name.is_empty() || name.len() > 64 || name.chars().any(char::is_control) {
            return Err(DeviceError::Invalid(
                "device name must be 1-64 printable characters".into(),
            ));
        }
        let now = now_ms();
        let node_text = node.to_string();
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let paired: Option<Option<String>> = tx
            .query_row(
                "SELECT scope FROM devices WHERE node_id = ?1 AND revoked_at IS NULL",
                [&node_text],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(scope) = paired {
            return Ok(StartOutcome::AlreadyPaired { scope });
        }
        match ticket {
            Some(secret) => {
                let valid: Option<i64> = tx
                    .query_row(
                        "SELECT 1 FROM tickets WHERE secret = ?1 AND used_at IS NULL AND expires_at > ?2
                         AND (reserved_by IS NULL OR reserved_by = ?3)",
                        params![&secret[..], now, node_text],
                        |r| r.get(0),
                    )
                    .optional()?;
                if valid.is_none() {
                    return Err(DeviceError::BadTicket);
                }
            }
            None if require_ticket => return Err(DeviceError::TicketRequired),
            None => {}
        }
        let pending = tx
            .query_row(
                &format!(
                    "SELECT {PENDING_COLUMNS} FROM pair_requests r LEFT JOIN devices d ON d.node_id = r.node_id
                     WHERE r.node_id = ?1 AND r.state = 'pending' AND r.expires_at > ?2"
                ),
                params![node_text, now],
                pending_from_row,
            )
            .optional()?;
        if let Some(p) = pending {
            return Ok(StartOutcome::Pending(p));
        }
        let since = now - WINDOW_MS;
        let per_peer: i64 = tx.query_row(
            "SELECT count(*) FROM pair_requests WHERE node_id = ?1 AND created_at > ?2",
            params![node_text, since],
            |r| r.get(0),
        )?;
        let bucket = origin.bucket();
        let per_origin: i64 = tx.query_row(
            "SELECT count(*) FROM pair_requests WHERE origin = ?1 AND created_at > ?2",
            params![bucket, since],
            |r| r.get(0),
        )?;
        let overall: i64 = tx.query_row(
            "SELECT count(*) FROM pair_requests WHERE created_at > ?1",
            [since],
            |r| r.get(0),
        )?;
        if per_peer >= MAX_REQUESTS_PER_PEER
            || per_origin >= origin.max_requests()
            || overall >= MAX_REQUESTS_OVERALL
        {
            return Err(DeviceError::Throttled {
                retry_after_secs: (WINDOW_MS / 1000) as u32,
            });
        }
        if let Some(secret) = ticket {
            tx.execute(
                "UPDATE tickets SET reserved_by = ?2 WHERE secret = ?1",
                params![&secret[..], node_text],
            )?;
        }
        let previously_revoked = tx
            .query_row(
                "SELECT 1 FROM devices WHERE node_id = ?1 AND revoked_at IS NOT NULL",
                [&node_text],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .is_some();
        let code = format_code(&new_code()?);
        let expires_at = now + CODE_LIFETIME.as_millis() as i64;
        tx.execute(
            "INSERT INTO pair_requests (code, node_id, device_name, created_at, expires_at, state, ticket, origin)
             VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?7)",
            params![code, node_text, name, now, expires_at, ticket.map(|t| t.to_vec()), bucket],
        )?;
        tx.commit()?;
        Ok(StartOutcome::Pending(PendingRequest {
            code,
            fingerprint: hearth_net::fingerprint(node.as_bytes()),
            node_id: node_text,
            device_name: name.to_string(),
            created_at: now,
            expires_at,
            previously_revoked,
        }))
    }

    /// The pending request with `code`, for the owner to check which device it is before
    /// approving it. An unknown code counts as a wrong attempt, like a wrong approval.
    pub fn request(&self, input: &str) -> Result<PendingRequest, DeviceError> {
        let code = format_code(&normalize_code(input));
        let now = now_ms();
        let conn = self.lock();
        self.throttle_wrong(&conn)?;
        let row = conn
            .query_row(
                &format!(
                    "SELECT {PENDING_COLUMNS}, r.state FROM pair_requests r
                     LEFT JOIN devices d ON d.node_id = r.node_id WHERE r.code = ?1"
                ),
                [&code],
                |r| Ok((pending_from_row(r)?, r.get::<_, String>(6)?)),
            )
            .optional()?;
        match row {
            None => {
                conn.execute(
                    "INSERT INTO approve_attempts (at, ok) VALUES (?1, 0)",
                    [now],
                )?;
                Err(DeviceError::WrongCode(code))
            }
            Some((_, state)) if state == "approved" || state == "used" => {
                Err(DeviceError::Used(code))
            }
            Some((_, state)) if state == "denied" => Err(DeviceError::Denied(code)),
            Some((p, _)) if p.expires_at <= now => Err(DeviceError::Expired(code)),
            Some((p, _)) => Ok(p),
        }
    }

    /// What the owner decided about `node`'s request `code`.
    pub fn poll(&self, node: &EndpointId, code: &str) -> Result<PollState, DeviceError> {
        let conn = self.lock();
        let row: Option<(String, i64, Option<String>)> = conn
            .query_row(
                "SELECT state, expires_at, scope FROM pair_requests WHERE code = ?1 AND node_id = ?2",
                params![code, node.to_string()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        Ok(match row {
            Some((state, _, scope)) if state == "approved" => PollState::Approved(scope),
            Some((state, _, _)) if state == "denied" => PollState::Denied,
            Some((_, expires, _)) if expires <= now_ms() => PollState::Expired,
            Some(_) => PollState::Pending,
            None => PollState::Expired,
        })
    }

    fn throttle_wrong(&self, conn: &Connection) -> Result<(), DeviceError> {
        let since = now_ms() - WRONG_CODE_WINDOW_MS;
        let wrong: i64 = conn.query_row(
            "SELECT count(*) FROM approve_attempts WHERE ok = 0 AND at > ?1",
            [since],
            |r| r.get(0),
        )?;
        if wrong >= MAX_WRONG_CODES {
            return Err(DeviceError::Throttled {
                retry_after_secs: (WRONG_CODE_WINDOW_MS / 1000) as u32,
            });
        }
        Ok(())
    }

    /// Approves the request with `code`: the device is paired at once.
    pub fn approve(
        &self,
        code: &str,
        name: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Device, DeviceError> {
        self.decide(code, true, name, scope)?
            .ok_or_else(|| DeviceError::WrongCode(code.to_string()))
    }

    /// Denies the request with `code`.
    pub fn deny(&self, code: &str) -> Result<(), DeviceError> {
        self.decide(code, false, None, None).map(|_| ())
    }

    fn decide(
        &self,
        input: &str,
        approve: bool,
        name: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Option<Device>, DeviceError> {
        let raw = normalize_code(input);
        let code = format_code(&raw);
        let now = now_ms();
        let mut conn = self.lock();
        self.throttle_wrong(&conn)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                "SELECT node_id, device_name, state, expires_at, ticket FROM pair_requests WHERE code = ?1",
                [&code],
                |r| {
                    Ok(RequestRow {
                        node_id: r.get(0)?,
                        device_name: r.get(1)?,
                        state: r.get(2)?,
                        expires_at: r.get(3)?,
                        ticket: r.get(4)?,
                    })
                },
            )
            .optional()?;
        let outcome = match &row {
            None => Err(DeviceError::WrongCode(code.clone())),
            Some(r) if r.state == "approved" || r.state == "used" => {
                Err(DeviceError::Used(code.clone()))
            }
            Some(r) if r.state == "denied" => Err(DeviceError::Denied(code.clone())),
            Some(r) if r.expires_at <= now => Err(DeviceError::Expired(code.clone())),
            Some(_) => Ok(()),
        };
        tx.execute(
            "INSERT INTO approve_attempts (at, ok) VALUES (?1, ?2)",
            params![now, outcome.is_ok()],
        )?;
        tx.execute(
            "DELETE FROM approve_attempts WHERE at < ?1",
            [now - WINDOW_MS],
        )?;
        if let Err(e) = outcome {
            // Record the failed attempt even though the decision fails.
            tx.commit()?;
            return Err(e);
        }
        let Some(RequestRow {
            node_id,
            device_name,
            ticket,
            ..
        }) = row
        else {
            return Err(DeviceError::WrongCode(code));
        };
        if !approve {
            tx.execute(
                "UPDATE pair_requests SET state = 'denied' WHERE code = ?1",
                [&code],
            )?;
            tx.commit()?;
            return Ok(None);
        }
        let name = name.map(str::to_string).unwrap_or(device_name);
        tx.execute(
            "UPDATE pair_requests SET state = 'approved', scope = ?2 WHERE code = ?1",
            params![code, scope],
        )?;
        if let Some(t) = ticket {
            tx.execute(
                "UPDATE tickets SET used_at = ?2 WHERE secret = ?1",
                params![t, now],
            )?;
        }
        tx.execute(
            "INSERT INTO devices (node_id, name, scope, paired_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(node_id) DO UPDATE SET name = excluded.name, scope = excluded.scope,
               paired_at = excluded.paired_at, revoked_at = NULL, admin = 0",
            params![node_id, name, scope, now],
        )?;
        tx.commit()?;
        drop(conn);
        Ok(Some(self.get(&node_id)?))
    }

    /// Adds a device directly, without a code (an owner's shortcut on the hub itself).
    pub fn add(
        &self,
        node: &EndpointId,
        name: &str,
        scope: Option<&str>,
    ) -> Result<Device, DeviceError> {
        {
            let conn = self.lock();
            conn.execute(
                "INSERT INTO devices (node_id, name, scope, paired_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(node_id) DO UPDATE SET name = excluded.name, scope = excluded.scope,
                   revoked_at = NULL, admin = 0",
                params![node.to_string(), name, scope, now_ms()],
            )?;
        }
        self.get(&node.to_string())
    }

    /// One device by id (or unique id prefix).
    pub fn get(&self, id: &str) -> Result<Device, DeviceError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT node_id, name, scope, paired_at, last_seen, revoked_at, online, admin FROM devices
             WHERE node_id LIKE ?1 || '%' LIMIT 2",
        )?;
        let rows: Vec<Device> = stmt
            .query_map([id.to_ascii_lowercase()], device_from_row)?
            .collect::<Result<_, _>>()?;
        match rows.as_slice() {
            [one] if id.len() >= 4 => Ok(one.clone()),
            [_, _] => Err(DeviceError::Invalid(format!(
                "{id} matches several devices"
            ))),
            _ => Err(DeviceError::NoDevice(id.to_string())),
        }
    }

    /// Every device, newest first.
    pub fn list(&self) -> Result<Vec<Device>, DeviceError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT node_id, name, scope, paired_at, last_seen, revoked_at, online, admin FROM devices ORDER BY paired_at DESC",
        )?;
        let rows = stmt
            .query_map([], device_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Pending requests, oldest first.
    pub fn pending(&self) -> Result<Vec<PendingRequest>, DeviceError> {
        let conn = self.lock();
        let mut stmt = conn.prepare(&format!(
            "SELECT {PENDING_COLUMNS} FROM pair_requests r LEFT JOIN devices d ON d.node_id = r.node_id
             WHERE r.state = 'pending' AND r.expires_at > ?1 ORDER BY r.created_at"
        ))?;
        let rows = stmt
            .query_map([now_ms()], pending_from_row)?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Renames a device.
    pub fn rename(&self, id: &str, name: &str) -> Result<Device, DeviceError> {
        let d = self.get(id)?;
        self.lock().execute(
            "UPDATE devices SET name = ?2 WHERE node_id = ?1",
            params![d.node_id, name],
        )?;
        self.get(&d.node_id)
    }

    /// Changes what a device may see (`None`: everything). A running hub restarts the
    /// device's session under the new scope within a second.
    pub fn set_scope(&self, id: &str, scope: Option<&str>) -> Result<Device, DeviceError> {
        let d = self.get(id)?;
        self.lock().execute(
            "UPDATE devices SET scope = ?2 WHERE node_id = ?1",
            params![d.node_id, scope],
        )?;
        self.get(&d.node_id)
    }

    /// Lets a device widen power through the relay, or stops it. Only the owner calls
    /// this (the hub's CLI, the owner's HTTP credential), never a relayed request; a
    /// running hub cuts the device's relayed connection within a second.
    pub fn set_admin(&self, id: &str, admin: bool) -> Result<Device, DeviceError> {
        let d = self.get(id)?;
        self.lock().execute(
            "UPDATE devices SET admin = ?2 WHERE node_id = ?1",
            params![d.node_id, admin],
        )?;
        self.get(&d.node_id)
    }

    /// Revokes a device: refused from now on (the hub also closes its connections).
    pub fn revoke(&self, id: &str) -> Result<Device, DeviceError> {
        let d = self.get(id)?;
        self.lock().execute(
            "UPDATE devices SET revoked_at = ?2 WHERE node_id = ?1 AND revoked_at IS NULL",
            params![d.node_id, now_ms()],
        )?;
        self.get(&d.node_id)
    }

    /// Node ids revoked so far.
    pub fn revoked(&self) -> Result<Vec<String>, DeviceError> {
        let conn = self.lock();
        let mut stmt = conn.prepare("SELECT node_id FROM devices WHERE revoked_at IS NOT NULL")?;
        let rows = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iroh::SecretKey;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const LAN: Origin = Origin::Direct(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 20)));

    /// `start_pair` from the LAN, expecting a code.
    fn start(
        r: &DeviceRegistry,
        node: &EndpointId,
        name: &str,
        ticket: Option<[u8; 16]>,
        require_ticket: bool,
    ) -> Result<PendingRequest, DeviceError> {
        start_from(r, node, name, ticket, require_ticket, LAN)
    }

    fn start_from(
        r: &DeviceRegistry,
        node: &EndpointId,
        name: &str,
        ticket: Option<[u8; 16]>,
        require_ticket: bool,
        origin: Origin,
    ) -> Result<PendingRequest, DeviceError> {
        match r.start_pair(node, name, ticket, require_ticket, origin)? {
            StartOutcome::Pending(p) => Ok(p),
            other => panic!("expected a code, got {other:?}"),
        }
    }

    fn registry() -> (tempfile::TempDir, DeviceRegistry) {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = DeviceRegistry::open(&dir.path().join("hub.db")).expect("open");
        (dir, r)
    }

    #[test]
    fn codes_look_right() {
        for _ in 0..100 {
            let c = new_code().expect("code");
            assert_eq!(c.len(), 8);
            assert!(c.bytes().all(|b| ALPHABET.contains(&b)), "{c}");
        }
        assert_eq!(normalize_code(" wdjb-mjht "), "WDJBMJHT");
        assert_eq!(format_code("WDJBMJHT"), "WDJB-MJHT");
    }

    #[test]
    fn approve_flow_and_distinct_refusals() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        let req = start(&r, &node, "laptop", None, false).expect("start");
        // Asking again returns the same pending code.
        assert_eq!(
            start(&r, &node, "laptop", None, false).expect("again").code,
            req.code
        );
        assert_eq!(
            r.poll(&node, &format_code(&normalize_code(&req.code)))
                .expect("poll"),
            PollState::Pending
        );
        assert!(!r.is_allowed(&node).expect("allowed?"));
        let err = r.approve("BBBB-BBBB", None, None).expect_err("wrong");
        assert!(matches!(err, DeviceError::WrongCode(_)), "{err}");
        let d = r
            .approve(&req.code.to_lowercase(), Some("Ada's laptop"), None)
            .expect("approve");
        assert_eq!(d.name, "Ada's laptop");
        assert!(r.is_allowed(&node).expect("allowed?"));
        assert_eq!(
            r.poll(&node, &req.code).expect("poll"),
            PollState::Approved(None)
        );
        let err = r.approve(&req.code, None, None).expect_err("reuse");
        assert!(matches!(err, DeviceError::Used(_)), "{err}");

        let other = SecretKey::generate().public();
        let req2 = start(&r, &other, "phone", None, false).expect("start");
        r.deny(&req2.code).expect("deny");
        assert_eq!(r.poll(&other, &req2.code).expect("poll"), PollState::Denied);
        let err = r.approve(&req2.code, None, None).expect_err("denied");
        assert!(matches!(err, DeviceError::Denied(_)), "{err}");

        r.revoke(&node.to_string()).expect("revoke");
        assert!(!r.is_allowed(&node).expect("allowed?"));
        assert!(r.is_revoked(&node).expect("revoked?"));
    }

    #[test]
    fn grants_follow_revocation_and_admin_is_reset_by_pairing_again() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        assert_eq!(r.grant(&node).expect("grant"), None, "never paired");
        r.add(&node, "laptop", Some("abc")).expect("add");
        assert_eq!(
            r.grant(&node).expect("grant"),
            Some(Grant {
                scope: Some("abc".into()),
                admin: false
            })
        );
        let d = r.set_admin(&node.to_string(), true).expect("admin");
        assert!(d.admin);
        assert!(r.grant(&node).expect("grant").is_some_and(|g| g.admin));
        r.revoke(&node.to_string()).expect("revoke");
        assert_eq!(r.grant(&node).expect("grant"), None, "revoked");
        // Paired again, it starts without the admin flag.
        r.add(&node, "laptop", None).expect("add again");
        assert_eq!(
            r.grant(&node).expect("grant"),
            Some(Grant {
                scope: None,
                admin: false
            })
        );
    }

    #[test]
    fn expired_codes_and_tickets() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        let req = start(&r, &node, "laptop", None, false).expect("start");
        r.lock()
            .execute("UPDATE pair_requests SET expires_at = 0", [])
            .expect("age it");
        let err = r.approve(&req.code, None, None).expect_err("expired");
        assert!(matches!(err, DeviceError::Expired(_)), "{err}");
        assert_eq!(r.poll(&node, &req.code).expect("poll"), PollState::Expired);

        assert!(matches!(
            start(&r, &node, "x", None, true),
            Err(DeviceError::TicketRequired)
        ));
        assert!(matches!(
            start(&r, &node, "x", Some([9; 16]), false),
            Err(DeviceError::BadTicket)
        ));
        let secret = r.issue_ticket().expect("ticket");
        let req = start(&r, &node, "x", Some(secret), true).expect("with ticket");
        r.approve(&req.code, None, None).expect("approve");
        let again = SecretKey::generate().public();
        assert!(
            matches!(
                start(&r, &again, "y", Some(secret), false),
                Err(DeviceError::BadTicket)
            ),
            "single use"
        );
    }

    #[test]
    fn floods_are_throttled() {
        let (_d, r) = registry();
        for _ in 0..MAX_WRONG_CODES {
            assert!(matches!(
                r.approve("ZZZZ-ZZZZ", None, None),
                Err(DeviceError::WrongCode(_))
            ));
        }
        assert!(matches!(
            r.approve("ZZZZ-ZZZZ", None, None),
            Err(DeviceError::Throttled { .. })
        ));
        let node = SecretKey::generate().public();
        for i in 0..MAX_REQUESTS_PER_PEER {
            let req = start(&r, &node, "n", None, false).expect("start");
            r.lock()
                .execute(
                    "UPDATE pair_requests SET state = 'denied' WHERE code = ?1",
                    [&req.code],
                )
                .expect("close");
            assert!(i < MAX_REQUESTS_PER_PEER);
        }
        assert!(matches!(
            start(&r, &node, "n", None, false),
            Err(DeviceError::Throttled { .. })
        ));
    }

    #[test]
    fn one_ticket_pairs_one_device() {
        let (_d, r) = registry();
        let secret = r.issue_ticket().expect("ticket");
        let first = SecretKey::generate().public();
        let second = SecretKey::generate().public();
        let req = start(&r, &first, "laptop", Some(secret), true).expect("first");
        // Reserved at Start, long before the owner approves: a second key is refused.
        assert!(matches!(
            start(&r, &second, "intruder", Some(secret), true),
            Err(DeviceError::BadTicket)
        ));
        // The key that holds the reservation may ask again (say, after a lost connection).
        assert_eq!(
            start(&r, &first, "laptop", Some(secret), true)
                .expect("again")
                .code,
            req.code
        );

        // Racing: many keys start at once with one fresh ticket; exactly one gets a code.
        let r = std::sync::Arc::new(r);
        let secret = r.issue_ticket().expect("ticket");
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let (r, barrier) = (r.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let key = SecretKey::generate().public();
                    let origin = Origin::Direct(IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8 + 1)));
                    barrier.wait();
                    r.start_pair(&key, "racer", Some(secret), true, origin)
                })
            })
            .collect();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        let won = results
            .iter()
            .filter(|x| matches!(x, Ok(StartOutcome::Pending(_))))
            .count();
        let lost = results
            .iter()
            .filter(|x| matches!(x, Err(DeviceError::BadTicket)))
            .count();
        assert_eq!((won, lost), (1, 7), "{results:?}");
    }

    #[test]
    fn one_host_cannot_lock_out_pairing() {
        let (_d, r) = registry();
        let host = Origin::Direct(IpAddr::V4(Ipv4Addr::new(192, 168, 1, 66)));
        // One host with many keys uses up its own budget, not everyone's.
        for _ in 0..MAX_REQUESTS_PER_ADDR {
            start_from(
                &r,
                &SecretKey::generate().public(),
                "bot",
                None,
                false,
                host,
            )
            .expect("within the host's budget");
        }
        assert!(matches!(
            r.start_pair(&SecretKey::generate().public(), "bot", None, false, host),
            Err(DeviceError::Throttled { .. })
        ));
        // Every address of one IPv6 /64 is the same host.
        let v6 = |last: u16| {
            Origin::Direct(IpAddr::V6(Ipv6Addr::new(
                0x2001, 0xdb8, 1, 2, 0, 0, 0, last,
            )))
        };
        assert_eq!(v6(1).bucket(), v6(0xffff).bucket());
        for i in 0..MAX_REQUESTS_PER_ADDR {
            start_from(
                &r,
                &SecretKey::generate().public(),
                "bot6",
                None,
                false,
                v6(i as u16 + 1),
            )
            .expect("within the /64's budget");
        }
        assert!(matches!(
            r.start_pair(
                &SecretKey::generate().public(),
                "bot6",
                None,
                false,
                v6(999)
            ),
            Err(DeviceError::Throttled { .. })
        ));
        // IPv4-mapped IPv6 counts as the IPv4 host.
        let mapped = Origin::Direct(IpAddr::V6(Ipv4Addr::new(192, 168, 1, 66).to_ipv6_mapped()));
        assert_eq!(mapped.bucket(), host.bucket());
        // Another device on the LAN and one through a relay still get codes.
        start(&r, &SecretKey::generate().public(), "laptop", None, false).expect("LAN device");
        start_from(
            &r,
            &SecretKey::generate().public(),
            "phone",
            None,
            false,
            Origin::Relayed,
        )
        .expect("relayed device");
    }

    #[test]
    fn revoked_key_is_flagged() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        let req = start(&r, &node, "laptop", None, false).expect("start");
        assert!(!req.previously_revoked);
        r.approve(&req.code, None, None).expect("approve");
        r.revoke(&node.to_string()).expect("revoke");
        let again = start(&r, &node, "laptop", None, false).expect("asks again");
        assert!(again.previously_revoked);
        assert_eq!(again.fingerprint, hearth_net::fingerprint(node.as_bytes()));
        let listed = r.pending().expect("pending");
        assert_eq!(listed.len(), 1);
        assert!(listed[0].previously_revoked);
        assert!(r.request(&again.code).expect("request").previously_revoked);
    }

    #[test]
    fn paired_key_start_returns_its_scope() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        r.add(&node, "laptop", Some("project-1")).expect("add");
        assert_eq!(
            r.start_pair(&node, "laptop", None, true, LAN)
                .expect("start"),
            StartOutcome::AlreadyPaired {
                scope: Some("project-1".into())
            }
        );
        let whole = SecretKey::generate().public();
        r.add(&whole, "desktop", None).expect("add");
        assert_eq!(
            r.start_pair(&whole, "desktop", None, false, LAN)
                .expect("start"),
            StartOutcome::AlreadyPaired { scope: None }
        );
    }

    #[test]
    fn request_shows_the_device_and_counts_wrong_codes() {
        let (_d, r) = registry();
        let node = SecretKey::generate().public();
        let req = start(&r, &node, "Ada's laptop", None, false).expect("start");
        let seen = r.request(&req.code.to_lowercase()).expect("request");
        assert_eq!(seen.device_name, "Ada's laptop");
        assert_eq!(seen.node_id, node.to_string());
        assert_eq!(seen.fingerprint, hearth_net::fingerprint(node.as_bytes()));
        for _ in 0..MAX_WRONG_CODES {
            assert!(matches!(
                r.request("ZZZZ-ZZZZ"),
                Err(DeviceError::WrongCode(_))
            ));
        }
        assert!(matches!(
            r.request(&req.code),
            Err(DeviceError::Throttled { .. })
        ));
    }
}
