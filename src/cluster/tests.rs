//! Whole connection lifecycles stepped through with a manual clock and a
//! simulated network: no socket, no sleep.

use super::*;
use crate::events::{CloseReason, EventKind, Purpose};
use crate::protocol::frame::{encode_response, RequestHeader};
use crate::protocol::messages::api_versions::{
    ApiVersionRange, ApiVersionsRequest, ApiVersionsResponse,
};
use crate::protocol::messages::find_coordinator::{Coordinator, FindCoordinatorResponse};
use crate::protocol::messages::metadata::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::{ApiKey, ErrorCode, Reader};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A simulated cluster of brokers `1..=n` at `b<id>:9092`, answering every
/// request at once unless told to hold an API.
struct Sim {
    c: Cluster,
    now: Instant,
    /// Brokers: id -> address.
    brokers: BTreeMap<i32, String>,
    /// Partition leaders of topic "t": partition -> broker id.
    leaders: BTreeMap<i32, i32>,
    /// The coordinator's broker id; below 0, FindCoordinator is answered
    /// with COORDINATOR_NOT_AVAILABLE.
    coordinator: i32,
    /// Addresses that refuse connections.
    refused: BTreeSet<String>,
    /// APIs whose requests get no answer.
    held: BTreeSet<ApiKey>,
    /// Live sockets (connected or connecting): id -> address.
    sockets: BTreeMap<ConnectionId, String>,
    /// Connect attempts in progress.
    connecting: BTreeSet<ConnectionId>,
    /// The largest number of attempts in progress at once.
    max_connecting: usize,
    /// Every request seen: (connection, address, api).
    log: Vec<(ConnectionId, String, ApiKey)>,
    events: Vec<ConnectionEvent>,
    responses: BTreeMap<RequestId, Result<Response, RequestError>>,
    /// Whether connects complete at once.
    auto_connect: bool,
    /// SASL on the brokers, when set.
    sasl: Option<SimSasl>,
    /// Answers to held SASL requests, delivered by [`Sim::release`].
    parked: Vec<(ConnectionId, Bytes)>,
    /// The other held requests, unanswered: (connection, api, version,
    /// correlation id), for a test to answer by hand.
    unanswered: Vec<(ConnectionId, ApiKey, i16, i32)>,
    /// Topics besides "t" (one partition, led by broker 1), by id: listed
    /// when Metadata asks for every topic, by name or by id.
    extra_topics: BTreeMap<String, [u8; 16]>,
    /// The highest Metadata version the brokers speak.
    metadata_max: i16,
    /// What each Metadata request asked for: its version, and its topics
    /// (name, id), `None` for every topic.
    metadata_asked: Vec<(i16, Option<Vec<AskedTopic>>)>,
    /// Deliver each answer in two pieces (three bytes, then the rest)
    /// instead of as one whole frame.
    split_answers: bool,
    /// The sockets never report the requests the broker does not answer
    /// as written (a socket that takes no more bytes).
    unwritten: bool,
    /// When each [`Action::FetchOAuthToken`] came (the test answers them
    /// with `handle_oauth_token`).
    token_asks: Vec<Instant>,
    /// The cluster id Metadata answers carry.
    cluster_id: Option<String>,
    /// The top-level error code of Metadata answers (v13, KIP-1102).
    metadata_error: ErrorCode,
    /// The leader epoch of every partition of "t".
    leader_epoch: i32,
}

/// A topic a Metadata request names: (name, id).
type AskedTopic = (Option<String>, [u8; 16]);

/// The id of topic "t" in the simulation.
const T_ID: [u8; 16] = [1; 16];

/// SASL on the simulated brokers: PLAIN and SCRAM-SHA-256 for one user.
struct SimSasl {
    mechanisms: Vec<crate::sasl::Mechanism>,
    user: String,
    password: String,
    /// `session_lifetime_ms` of SaslAuthenticate responses.
    lifetime_ms: i64,
    /// The OAUTHBEARER tokens received, per connection, in order; tokens
    /// that start with `good` are accepted.
    tokens: Vec<(ConnectionId, String)>,
    /// SCRAM exchanges in progress, per connection.
    scram: BTreeMap<
        ConnectionId,
        (
            crate::sasl::scram::ScramServer<sha2::Sha256>,
            Option<crate::sasl::scram::ScramCredential>,
        ),
    >,
}

impl SimSasl {
    fn new(user: &str, password: &str) -> Self {
        SimSasl {
            mechanisms: vec![
                crate::sasl::Mechanism::Plain,
                crate::sasl::Mechanism::ScramSha256,
            ],
            user: user.into(),
            password: password.into(),
            lifetime_ms: 0,
            tokens: Vec::new(),
            scram: BTreeMap::new(),
        }
    }
}

fn config(bootstrap: &[&str], group: Option<&str>) -> ClusterConfig {
    let mut c = ClusterConfig::new(bootstrap.iter().copied());
    c.group_id = group.map(str::to_owned);
    c.connections_max_idle = Some(Duration::from_secs(10));
    c
}

impl Sim {
    fn new(config: ClusterConfig) -> Self {
        let now = Instant::now();
        Sim {
            c: Cluster::new(config, now, 42),
            now,
            brokers: (1..=3).map(|id| (id, format!("b{id}:9092"))).collect(),
            leaders: [(0, 1), (1, 3)].into_iter().collect(),
            coordinator: 2,
            refused: BTreeSet::new(),
            held: BTreeSet::new(),
            sockets: BTreeMap::new(),
            connecting: BTreeSet::new(),
            max_connecting: 0,
            log: Vec::new(),
            events: Vec::new(),
            responses: BTreeMap::new(),
            auto_connect: true,
            sasl: None,
            parked: Vec::new(),
            unanswered: Vec::new(),
            extra_topics: BTreeMap::new(),
            metadata_max: ApiKey::Metadata.client_versions().max,
            metadata_asked: Vec::new(),
            split_answers: false,
            unwritten: false,
            token_asks: Vec::new(),
            cluster_id: Some("sim".into()),
            metadata_error: ErrorCode::None,
            leader_epoch: 0,
        }
    }

    /// Carries out every action, answering as the brokers would, until the
    /// cluster asks for nothing more.
    fn pump(&mut self) {
        // The simulated network answers at once, so a pump that never
        // settles is the connection manager acting without end at one
        // instant (a connect storm, a request loop): fail, not hang.
        let mut actions = 0;
        loop {
            let mut progressed = false;
            while let Some(action) = self.c.poll_action() {
                actions += 1;
                assert!(actions < 100_000, "no end of actions at one instant");
                progressed = true;
                match action {
                    Action::Connect { conn, addr, .. } => {
                        self.sockets.insert(conn, addr.clone());
                        self.connecting.insert(conn);
                        self.max_connecting = self.max_connecting.max(self.connecting.len());
                        if self.refused.contains(&addr) {
                            self.connecting.remove(&conn);
                            self.sockets.remove(&conn);
                            self.c.handle_connect_failed(self.now, conn, refused());
                        } else if self.auto_connect {
                            self.connecting.remove(&conn);
                            self.c.handle_connected(self.now, conn, peer(&addr));
                        }
                    }
                    Action::Transmit {
                        conn,
                        bytes,
                        written,
                    } => {
                        let addr = self.sockets[&conn].clone();
                        let mut answers = Vec::new();
                        let mut buf = bytes;
                        while !buf.is_empty() {
                            let size = i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
                            let frame = buf.slice(4..4 + size);
                            buf = buf.slice(4 + size..);
                            let mut r = Reader::new(frame.clone());
                            let header = RequestHeader::decode(&mut r).unwrap();
                            let api = ApiKey::from_code(header.api_key).unwrap();
                            self.log.push((conn, addr.clone(), api));
                            if matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate) {
                                let answer = self.answer_sasl(conn, &header, api, frame);
                                if self.held.contains(&api) {
                                    self.parked.push((conn, answer));
                                } else {
                                    answers.push(answer);
                                }
                            } else if self.held.contains(&api) {
                                self.unanswered.push((
                                    conn,
                                    api,
                                    header.api_version,
                                    header.correlation_id,
                                ));
                            } else {
                                let asked = (api == ApiKey::Metadata).then(|| {
                                    let (_, req) = crate::protocol::frame::decode_request::<
                                        crate::protocol::messages::metadata::MetadataRequest,
                                    >(frame)
                                    .expect("a Metadata request");
                                    req.topics.map(|ts| {
                                        ts.into_iter().map(|t| (t.name, t.topic_id)).collect()
                                    })
                                });
                                if let Some(asked) = &asked {
                                    self.metadata_asked
                                        .push((header.api_version, asked.clone()));
                                }
                                answers.push(self.answer(&header, api, asked));
                            }
                        }
                        for answer in answers {
                            if self.split_answers {
                                // A partial frame, then the rest: not one
                                // whole frame, so it is buffered and joined.
                                self.c.handle_received(self.now, conn, answer.slice(..3));
                                self.c.handle_received(self.now, conn, answer.slice(3..));
                            } else {
                                // Whole frames, as the runtime's reader
                                // delivers them.
                                self.c.handle_received(self.now, conn, answer);
                            }
                        }
                        if let Some(n) = written {
                            if !self.unwritten {
                                self.c.handle_written(conn, n);
                            }
                        }
                    }
                    Action::Close { conn } => {
                        self.connecting.remove(&conn);
                        assert!(
                            self.sockets.remove(&conn).is_some(),
                            "close of unknown {conn}"
                        );
                    }
                    Action::FetchOAuthToken { provider, timeout } => {
                        assert!(provider.is_async());
                        assert_eq!(timeout, self.c.config.request_timeout);
                        self.token_asks.push(self.now);
                    }
                }
            }
            while let Some(e) = self.c.poll_event() {
                self.events.push(e);
            }
            while let Some((id, r)) = self.c.poll_response() {
                self.responses.insert(id, r);
            }
            if !progressed {
                return;
            }
        }
    }

    /// Answers SaslHandshake and SaslAuthenticate as a Kafka broker with
    /// [`SimSasl`] does.
    fn answer_sasl(
        &mut self,
        conn: ConnectionId,
        header: &RequestHeader,
        api: ApiKey,
        frame: Bytes,
    ) -> Bytes {
        use crate::protocol::frame::decode_request;
        use crate::protocol::messages::sasl_authenticate::{
            SaslAuthenticateRequest, SaslAuthenticateResponse,
        };
        use crate::protocol::messages::sasl_handshake::{
            SaslHandshakeRequest, SaslHandshakeResponse,
        };
        use crate::sasl::scram::{ScramCredential, ScramServer};
        let (v, corr) = (header.api_version, header.correlation_id);
        let sasl = self.sasl.as_mut().expect("SASL requests only with SimSasl");
        let enabled: Vec<String> = sasl.mechanisms.iter().map(|m| m.name().into()).collect();
        if api == ApiKey::SaslHandshake {
            let (_, req) = decode_request::<SaslHandshakeRequest>(frame).unwrap();
            let ok = enabled.contains(&req.mechanism);
            if req.mechanism == "SCRAM-SHA-256" {
                sasl.scram.insert(conn, (ScramServer::new(), None));
            }
            let resp = SaslHandshakeResponse {
                error_code: if ok { 0 } else { 33 },
                mechanisms: enabled,
            };
            return encode_response(&resp, v, corr).unwrap();
        }
        let (_, req) = decode_request::<SaslAuthenticateRequest>(frame).unwrap();
        let text = String::from_utf8(req.auth_bytes.to_vec()).unwrap();
        let failed = |m: &str| SaslAuthenticateResponse {
            error_code: 58,
            error_message: Some(m.into()),
            ..Default::default()
        };
        let lifetime_ms = sasl.lifetime_ms;
        let (user, password) = (sasl.user.clone(), sasl.password.clone());
        let done = |bytes: Vec<u8>| SaslAuthenticateResponse {
            auth_bytes: bytes.into(),
            session_lifetime_ms: lifetime_ms,
            ..Default::default()
        };
        let resp = match sasl.scram.get_mut(&conn) {
            None if text.starts_with("n,,") => {
                let (token, _) = crate::sasl::parse_oauthbearer_message(text.as_bytes()).unwrap();
                sasl.tokens.push((conn, token.clone()));
                if token.starts_with("good") {
                    done(Vec::new())
                } else {
                    failed("invalid_token")
                }
            }
            None => {
                if text == format!("\0{user}\0{password}") {
                    done(Vec::new())
                } else {
                    failed("Authentication failed: Invalid username or password")
                }
            }
            Some((server, credential @ None)) => {
                let stored = ScramCredential::new::<sha2::Sha256>(&password, b"salt", 4096);
                let (first, cred) = server
                    .client_first(&text, "snonce", |u| (u == user).then_some(stored))
                    .unwrap();
                *credential = Some(cred);
                SaslAuthenticateResponse {
                    auth_bytes: first.into_bytes().into(),
                    ..Default::default()
                }
            }
            Some((server, Some(cred))) => {
                let cred = cred.clone();
                let outcome = server.client_final(&text, &cred);
                sasl.scram.remove(&conn);
                match outcome {
                    Ok((fin, _)) => done(fin.into_bytes()),
                    Err(_) => failed("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
                }
            }
        };
        encode_response(&resp, v, corr).unwrap()
    }

    /// Delivers the answers to held SASL requests.
    fn release(&mut self) {
        self.held.remove(&ApiKey::SaslHandshake);
        self.held.remove(&ApiKey::SaslAuthenticate);
        for (conn, answer) in std::mem::take(&mut self.parked) {
            self.c.handle_received(self.now, conn, answer);
        }
        self.pump();
    }

    /// `asked`: for Metadata, the topics asked for (`None` for every one).
    fn answer(
        &self,
        header: &RequestHeader,
        api: ApiKey,
        asked: Option<Option<Vec<AskedTopic>>>,
    ) -> Bytes {
        let v = header.api_version;
        let corr = header.correlation_id;
        match api {
            ApiKey::ApiVersions => encode_response(
                &ApiVersionsResponse {
                    api_keys: ApiKey::ALL
                        .iter()
                        .map(|k| ApiVersionRange {
                            api_key: k.code(),
                            min_version: 0,
                            max_version: if *k == ApiKey::Metadata {
                                self.metadata_max
                            } else {
                                k.client_versions().max
                            },
                            unknown_tagged_fields: Vec::new(),
                        })
                        .collect(),
                    ..ApiVersionsResponse::default()
                },
                v,
                corr,
            ),
            ApiKey::Metadata => {
                encode_response(&self.metadata_response(asked.flatten().as_deref()), v, corr)
            }
            ApiKey::FindCoordinator if self.coordinator < 0 => {
                let code = ErrorCode::CoordinatorNotAvailable.code();
                let resp = if v >= 4 {
                    FindCoordinatorResponse {
                        coordinators: vec![Coordinator {
                            key: "g".into(),
                            node_id: -1,
                            error_code: code,
                            ..Coordinator::default()
                        }],
                        ..FindCoordinatorResponse::default()
                    }
                } else {
                    FindCoordinatorResponse {
                        error_code: code,
                        node_id: -1,
                        ..FindCoordinatorResponse::default()
                    }
                };
                encode_response(&resp, v, corr)
            }
            ApiKey::FindCoordinator => {
                let addr = &self.brokers[&self.coordinator];
                let (host, port) = addr.split_once(':').unwrap();
                let port: i32 = port.parse().unwrap();
                let resp = if v >= 4 {
                    FindCoordinatorResponse {
                        coordinators: vec![Coordinator {
                            key: "g".into(),
                            node_id: self.coordinator,
                            host: host.into(),
                            port,
                            ..Coordinator::default()
                        }],
                        ..FindCoordinatorResponse::default()
                    }
                } else {
                    FindCoordinatorResponse {
                        node_id: self.coordinator,
                        host: host.into(),
                        port,
                        ..FindCoordinatorResponse::default()
                    }
                };
                encode_response(&resp, v, corr)
            }
            other => panic!("the simulated broker does not serve {other}"),
        }
        .unwrap()
    }

    /// "t" always (as a broker that auto-creates it would), and the extra
    /// topics asked for: all of them for a null array, by name, or by id
    /// (UNKNOWN_TOPIC_ID for an id no topic has).
    fn metadata_response(&self, asked: Option<&[AskedTopic]>) -> MetadataResponse {
        let extra = |name: &str, id: [u8; 16]| MetadataResponseTopic {
            name: Some(name.into()),
            topic_id: id,
            partitions: vec![MetadataResponsePartition {
                partition_index: 0,
                leader_id: 1,
                ..MetadataResponsePartition::default()
            }],
            ..MetadataResponseTopic::default()
        };
        let mut extras = Vec::new();
        match asked {
            None => extras.extend(self.extra_topics.iter().map(|(n, id)| extra(n, *id))),
            Some(list) => {
                for (name, id) in list {
                    match name {
                        Some(name) if !name.is_empty() => {
                            if let Some(id) = self.extra_topics.get(name) {
                                extras.push(extra(name, *id));
                            }
                        }
                        _ => match self.extra_topics.iter().find(|(_, i)| *i == id) {
                            Some((name, id)) => extras.push(extra(name, *id)),
                            None => extras.push(MetadataResponseTopic {
                                error_code: ErrorCode::UnknownTopicId.code(),
                                name: None,
                                topic_id: *id,
                                ..MetadataResponseTopic::default()
                            }),
                        },
                    }
                }
            }
        }
        let mut response = self.metadata_response_t();
        response.topics.extend(extras);
        response
    }

    fn metadata_response_t(&self) -> MetadataResponse {
        MetadataResponse {
            brokers: self
                .brokers
                .iter()
                .map(|(id, addr)| {
                    let (host, port) = addr.split_once(':').unwrap();
                    MetadataResponseBroker {
                        node_id: *id,
                        host: host.into(),
                        port: port.parse().unwrap(),
                        ..MetadataResponseBroker::default()
                    }
                })
                .collect(),
            topics: vec![MetadataResponseTopic {
                name: Some("t".into()),
                topic_id: T_ID,
                partitions: self
                    .leaders
                    .iter()
                    .map(|(p, leader)| MetadataResponsePartition {
                        partition_index: *p,
                        leader_id: *leader,
                        leader_epoch: self.leader_epoch,
                        ..MetadataResponsePartition::default()
                    })
                    .collect(),
                ..MetadataResponseTopic::default()
            }],
            cluster_id: self.cluster_id.clone(),
            error_code: self.metadata_error.code(),
            ..MetadataResponse::default()
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.c.handle_timeout(self.now);
        self.pump();
    }

    fn request(&mut self, target: Target) -> RequestId {
        let id = self.c.request(
            self.now,
            target,
            Box::new(ApiVersionsRequest::from_this_client()),
        );
        self.pump();
        id
    }

    /// How many `api` requests the brokers got.
    fn served(&self, api: ApiKey) -> usize {
        self.log.iter().filter(|(_, _, a)| *a == api).count()
    }

    /// Queues `body` for `target` and carries out what follows.
    fn send(&mut self, target: Target, body: Box<dyn RequestBody>) -> RequestId {
        let id = self.c.request(self.now, target, body);
        self.pump();
        id
    }

    /// The live sockets' purposes, sorted.
    fn census(&self) -> Vec<(Purpose, Option<i32>)> {
        let mut v: Vec<_> = self
            .c
            .connections(self.now)
            .into_iter()
            .map(|c| (c.purpose, c.broker))
            .collect();
        v.sort_by_key(|(p, b)| (format!("{p}"), *b));
        assert_eq!(v.len(), self.sockets.len(), "cluster and sockets disagree");
        v
    }

    fn kinds(&self) -> Vec<(String, Purpose, String)> {
        self.events
            .iter()
            .map(|e| {
                let kind = match &e.kind {
                    EventKind::Closed { reason, .. } => format!("closed:{reason}"),
                    other => format!("{other:?}").to_lowercase(),
                };
                (kind, e.purpose, e.addr.clone())
            })
            .collect()
    }
}

fn peer(addr: &str) -> std::net::SocketAddr {
    // The simulated brokers have no real addresses; any distinct one will do.
    let n: u16 = addr.bytes().map(u16::from).sum();
    std::net::SocketAddr::from(([10, 0, 0, 1], n))
}

#[test]
fn nothing_happens_before_a_request() {
    let mut sim = Sim::new(config(&["b1:9092", "b2:9092"], Some("g")));
    sim.pump();
    assert!(sim.sockets.is_empty());
    assert!(sim.events.is_empty());
    assert_eq!(sim.c.poll_timeout(), None);
}

#[test]
fn group_lifecycle_bootstrap_coordinator_leaders_then_retirement() {
    let mut sim = Sim::new(config(&["b1:9092", "b2:9092", "b3:9092"], Some("g")));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    let join = sim.request(Target::Coordinator);
    sim.pump();

    // One bootstrap connection carried ApiVersions, Metadata and
    // FindCoordinator; then the coordinator got its own connection.
    let bootstrap_conn = sim.events[0].connection;
    assert_eq!(sim.events[0].purpose, Purpose::Bootstrap);
    let on_bootstrap: Vec<ApiKey> = sim
        .log
        .iter()
        .filter(|(c, _, _)| *c == bootstrap_conn)
        .map(|(_, _, api)| *api)
        .collect();
    assert_eq!(
        on_bootstrap,
        vec![
            ApiKey::ApiVersions,
            ApiKey::Metadata,
            ApiKey::FindCoordinator
        ]
    );
    assert_eq!(sim.c.coordinator().map(|b| b.id), Some(2));
    assert!(sim.responses[&join].is_ok(), "{:?}", sim.responses[&join]);
    let coordinator_requests: Vec<ApiKey> = sim
        .log
        .iter()
        .filter(|(_, addr, _)| addr == "b2:9092")
        .map(|(_, _, api)| *api)
        .collect();
    assert!(coordinator_requests.len() >= 2, "{coordinator_requests:?}");
    let census = sim.census();
    assert!(
        census.contains(&(Purpose::Coordinator, Some(2))),
        "{census:?}"
    );
    assert!(
        census.iter().any(|(p, _)| *p == Purpose::Bootstrap),
        "{census:?}"
    );

    // Fetch-like requests to both leaders: one connection each (or the
    // bootstrap promoted, if it reached one of them), then the bootstrap
    // connection is gone.
    let leaders: BTreeSet<i32> = sim.leaders.values().copied().collect();
    for leader in &leaders {
        sim.request(Target::Broker(*leader));
    }
    assert_eq!(
        sim.census(),
        vec![
            (Purpose::Coordinator, Some(2)),
            (Purpose::Leader, Some(1)),
            (Purpose::Leader, Some(3)),
        ]
    );
    let kinds = sim.kinds();
    let retired_or_promoted = kinds
        .iter()
        .any(|(k, _, _)| k == "retired" || k == "promoted");
    assert!(retired_or_promoted, "{kinds:?}");
    // No broker without a partition of ours was ever connected as leader.
    assert!(!sim
        .events
        .iter()
        .any(|e| e.purpose == Purpose::Leader && e.broker == Some(2)));
}

#[test]
fn answers_cut_anywhere_are_joined_as_whole_frames_are_taken() {
    let run = |split: bool| {
        let mut sim = Sim::new(config(&["b1:9092", "b2:9092", "b3:9092"], Some("g")));
        sim.split_answers = split;
        sim.c.set_topics(["t".to_owned()]);
        sim.c.handle_timeout(sim.now);
        let join = sim.request(Target::Coordinator);
        let fetch = sim.request(Target::Broker(3));
        sim.pump();
        assert!(sim.responses[&join].is_ok(), "{:?}", sim.responses[&join]);
        assert!(sim.responses[&fetch].is_ok(), "{:?}", sim.responses[&fetch]);
        assert!(!sim.kinds().iter().any(|(k, _, _)| k == "closed:error"));
        (sim.log.len(), sim.census())
    };
    assert_eq!(run(true), run(false));
}

#[test]
fn bootstrap_reaching_a_leader_is_promoted_not_duplicated() {
    // Only b1 is listed: the bootstrap connection reaches broker 1, which
    // leads partition 0.
    let mut sim = Sim::new(config(&["b1:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let connects_before = sim.c.counters()["b1:9092"].connects;
    sim.request(Target::Broker(1));
    assert_eq!(sim.c.counters()["b1:9092"].connects, connects_before);
    assert!(sim
        .kinds()
        .iter()
        .any(|(k, p, _)| k == "promoted" && *p == Purpose::Leader));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(1))]);
}

#[test]
fn manual_assignment_retires_bootstrap_after_first_leader() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert_eq!(sim.census(), vec![(Purpose::Bootstrap, Some(2))]);
    sim.request(Target::Broker(3));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(3))]);
    let kinds = sim.kinds();
    let retired = kinds
        .iter()
        .position(|(k, p, a)| k == "retired" && *p == Purpose::Bootstrap && a == "b2:9092");
    let closed = kinds
        .iter()
        .position(|(k, _, a)| k == "closed:retired" && a == "b2:9092");
    assert!(retired.is_some() && closed > retired, "{kinds:?}");
}

/// In group mode a ready leader connection is not enough: the bootstrap
/// connection stays until the coordinator connection is ready too
/// (docs/connections.md rule 6).
#[test]
fn in_group_mode_the_bootstrap_waits_for_a_ready_coordinator() {
    let mut sim = Sim::new(config(&["b2:9092"], Some("g")));
    // Broker 3 leads partitions of "t" and coordinates the group; it
    // refuses connections for now. Broker 2 (the bootstrap) has no role.
    sim.coordinator = 3;
    sim.refused.insert("b3:9092".into());
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    sim.request(Target::Broker(1));
    let census = sim.census();
    assert!(census.contains(&(Purpose::Leader, Some(1))), "{census:?}");
    assert!(
        census.iter().any(|(p, _)| *p == Purpose::Bootstrap),
        "retired before the coordinator connection was ready: {census:?}"
    );
    assert!(!sim.kinds().iter().any(|(k, _, _)| k == "retired"));
    // The coordinator comes back: once its connection is ready, the
    // bootstrap connection goes.
    sim.refused.clear();
    sim.advance(Duration::from_secs(2));
    sim.request(Target::Coordinator);
    let census = sim.census();
    assert!(
        census.contains(&(Purpose::Coordinator, Some(3))),
        "{census:?}"
    );
    assert!(
        !census.iter().any(|(p, _)| *p == Purpose::Bootstrap),
        "{census:?}"
    );
}

#[test]
fn metadata_goes_over_the_least_loaded_leader_connection() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(1));
    sim.request(Target::Broker(3));
    // Broker 1's connection is busy with a request that gets no answer.
    sim.held.insert(ApiKey::ApiVersions);
    sim.request(Target::Broker(1));
    sim.held.clear();
    let before = sim.log.len();
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    let metadata: Vec<&String> = sim.log[before..]
        .iter()
        .filter(|(_, _, api)| *api == ApiKey::Metadata)
        .map(|(_, addr, _)| addr)
        .collect();
    assert_eq!(metadata, vec!["b3:9092"]);
    // No bootstrap connection was opened for it.
    assert!(!sim.census().iter().any(|(p, _)| *p == Purpose::Bootstrap));
}

/// While a partition has no leader, Metadata is asked again with a backoff
/// that grows to `retry.backoff.max.ms`; a leader error elsewhere brings it
/// back to `retry.backoff.ms`.
#[test]
fn incomplete_metadata_backs_off_to_the_max_until_a_leader_error_hurries_it() {
    let mut sim = Sim::new(config(&["b1:9092"], None));
    sim.leaders.insert(1, -1);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let metadata_times = |sim: &mut Sim, span: Duration| -> usize {
        let before = sim.log.len();
        step_through_deadlines(sim, span);
        sim.log[before..]
            .iter()
            .filter(|(_, _, api)| *api == ApiKey::Metadata)
            .count()
    };
    // 100 ms doubling to 1 s (±20%): a handful in the first 3 s, then about
    // one a second.
    let early = metadata_times(&mut sim, Duration::from_secs(3));
    assert!(
        (3..=8).contains(&early),
        "{early} Metadata in the first 3 s"
    );
    let later = metadata_times(&mut sim, Duration::from_secs(10));
    assert!(
        (8..=13).contains(&later),
        "{later} Metadata in the next 10 s"
    );
    // A leader error: the next Metadata within 120 ms, not up to 1.2 s.
    let before = sim.log.len();
    let start = sim.now;
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    while !sim.log[before..]
        .iter()
        .any(|(_, _, api)| *api == ApiKey::Metadata)
    {
        let next = sim.c.poll_timeout().expect("a retry is due");
        assert!(
            next <= start + Duration::from_millis(120),
            "{:?}",
            next - start
        );
        sim.advance(next - sim.now);
    }
}

/// With leader connections ready, Metadata never goes over the
/// coordinator connection, however idle it is (docs/connections.md rule
/// 2: the coordinator's connection is a fallback only).
#[test]
fn metadata_prefers_a_leader_connection_to_an_idle_coordinator_connection() {
    let mut sim = Sim::new(config(&["b2:9092"], Some("g")));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    sim.request(Target::Broker(1));
    sim.request(Target::Broker(3));
    let purposes: BTreeMap<ConnectionId, Purpose> = sim
        .c
        .connections(sim.now)
        .into_iter()
        .map(|c| (c.id, c.purpose))
        .collect();
    assert!(purposes.values().any(|p| *p == Purpose::Coordinator));
    let before = sim.log.len();
    for _ in 0..3 {
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
    }
    let over: Vec<Purpose> = sim.log[before..]
        .iter()
        .filter(|(_, _, api)| *api == ApiKey::Metadata)
        .map(|(conn, _, _)| purposes[conn])
        .collect();
    assert!(!over.is_empty());
    assert!(over.iter().all(|p| *p == Purpose::Leader), "{over:?}");
}

/// A tool's requests to "the bootstrap connection" share one socket.
#[test]
fn requests_to_the_bootstrap_connection_share_one_socket() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    for _ in 0..3 {
        sim.request(Target::Bootstrap);
    }
    assert_eq!(sim.census(), vec![(Purpose::Bootstrap, None)]);
    assert_eq!(sim.c.counters()["b2:9092"].connects, 1);
}

/// A request for a broker the metadata does not know yet refreshes the
/// metadata (after the retry backoff, the cache being fresh) and goes out
/// once the broker is known, well within its own timeout.
#[test]
fn a_broker_missing_from_the_metadata_is_looked_up() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.brokers.insert(4, "b4:9092".into());
    let before = sim.log.len();
    let id = sim.request(Target::Broker(4));
    assert!(!sim.responses.contains_key(&id));
    sim.advance(Duration::from_millis(200));
    let apis: Vec<(String, ApiKey)> = sim.log[before..]
        .iter()
        .map(|(_, addr, api)| (addr.clone(), *api))
        .collect();
    assert!(
        apis.iter().any(|(_, api)| *api == ApiKey::Metadata),
        "{apis:?}"
    );
    assert!(sim.responses[&id].is_ok(), "{:?}", sim.responses.get(&id));
    assert!(apis.iter().any(|(addr, _)| addr == "b4:9092"), "{apis:?}");

    // With a Metadata request already in flight (unanswered), a request
    // for another unknown broker waits for it: no second one is sent.
    sim.held.insert(ApiKey::Metadata);
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    let before = sim.log.len();
    sim.request(Target::Broker(5));
    sim.advance(Duration::from_millis(500));
    let metadata = sim.log[before..]
        .iter()
        .filter(|(_, _, api)| *api == ApiKey::Metadata)
        .count();
    assert_eq!(metadata, 0, "a second Metadata while one is in flight");
}

#[test]
fn idle_connections_close_at_exactly_the_idle_time() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(3));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(3))]);
    // The deadline is reported, so the runtime knows when to wake.
    assert_eq!(
        sim.c.poll_timeout(),
        Some(sim.now + Duration::from_secs(10))
    );
    sim.advance(Duration::from_secs(10) - Duration::from_millis(1));
    assert_eq!(sim.census().len(), 1);
    sim.advance(Duration::from_millis(1));
    assert!(sim.census().is_empty());
    let last = sim.events.last().unwrap();
    assert!(
        matches!(
            last.kind,
            EventKind::Closed {
                reason: CloseReason::Idle,
                ..
            }
        ),
        "{last:?}"
    );
    assert_eq!(sim.c.counters()["b3:9092"].closed_idle, 1);
}

/// A connection with a request in flight is busy, not idle, however long
/// the broker takes (a long-polling Fetch): only the request timeout ends
/// it.
#[test]
fn a_connection_waiting_for_an_answer_is_not_idle() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(3));
    // The next request on it gets no answer for 20 s: twice the idle time
    // (10 s), within the request timeout (30 s).
    sim.held.insert(ApiKey::ApiVersions);
    let pending = sim.request(Target::Broker(3));
    for _ in 0..20 {
        sim.advance(Duration::from_secs(1));
    }
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(3))]);
    assert!(!sim.responses.contains_key(&pending));
    assert_eq!(sim.c.counters()["b3:9092"].closed_idle, 0);
}

#[test]
fn idle_reaping_can_be_disabled() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    let mut sim = Sim::new(cfg);
    sim.request(Target::AnyBroker);
    sim.advance(Duration::from_secs(3600));
    assert_eq!(sim.census().len(), 1);
}

#[test]
fn a_thousand_bootstrap_addresses_are_tried_one_at_a_time() {
    let addrs: Vec<String> = (0..1000).map(|i| format!("h{i}:9092")).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let mut sim = Sim::new(config(&refs, None));
    // Connects do not complete by themselves: each attempt stays pending
    // until this test fails it, so any second attempt would show.
    sim.auto_connect = false;
    let id = sim.request(Target::AnyBroker);
    let mut tried = BTreeSet::new();
    for round in 0..1000 {
        assert_eq!(sim.sockets.len(), 1, "round {round}: one attempt at a time");
        let (&conn, addr) = sim.sockets.iter().next().unwrap();
        assert!(tried.insert(addr.clone()), "{addr} tried twice");
        if round == 999 {
            sim.connecting.clear();
            sim.c.handle_connected(sim.now, conn, peer(addr));
        } else {
            sim.sockets.remove(&conn);
            sim.connecting.clear();
            sim.c.handle_connect_failed(sim.now, conn, refused());
        }
        sim.pump();
    }
    assert!(sim.responses[&id].is_ok());
    let attempts: u64 = sim.c.counters().values().map(|c| c.connects).sum();
    assert_eq!(attempts, 1000);
    assert_eq!(sim.census(), vec![(Purpose::Bootstrap, None)]);
}

#[test]
fn reconnects_back_off_exponentially_with_jitter() {
    let mut cfg = config(&["b1:9092"], None);
    cfg.request_timeout = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    sim.refused.insert("b1:9092".into());
    sim.request(Target::AnyBroker);
    let mut attempt_times = vec![sim.now];
    while attempt_times.len() < 8 {
        let wake = sim.c.poll_timeout().expect("waiting for the backoff");
        let before = sim.c.counters()["b1:9092"].connects;
        sim.advance(wake.saturating_duration_since(sim.now));
        if sim.c.counters()["b1:9092"].connects > before {
            attempt_times.push(sim.now);
        }
    }
    let gaps: Vec<Duration> = attempt_times.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let nominal = Duration::from_millis(50 * (1u64 << i)).min(Duration::from_millis(1000));
        assert!(
            *gap >= nominal.mul_f64(0.8) && *gap <= nominal.mul_f64(1.2),
            "gap {i}: {gap:?}, nominal {nominal:?}"
        );
    }
}

#[test]
fn a_request_timeout_closes_the_connection_and_fails_what_was_in_flight() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.request(Target::AnyBroker);
    sim.held.insert(ApiKey::ApiVersions);
    let id = sim.request(Target::AnyBroker);
    sim.advance(Duration::from_secs(30));
    assert!(sim.census().is_empty());
    match &sim.responses[&id] {
        Err(e @ RequestError::ConnectionLost { .. }) => assert!(e.is_retriable()),
        other => panic!("{other:?}"),
    }
    assert!(sim.kinds().iter().any(|(k, _, _)| k == "closed:error"));
}

#[test]
fn a_peer_close_fails_in_flight_requests_and_closes_our_side() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.request(Target::AnyBroker);
    sim.held.insert(ApiKey::ApiVersions);
    let id = sim.request(Target::AnyBroker);
    let conn = *sim.sockets.keys().next().unwrap();
    sim.c
        .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
    sim.pump();
    // The runtime was told to close the socket: nothing in CLOSE_WAIT.
    assert!(sim.sockets.is_empty());
    assert!(matches!(
        sim.responses[&id],
        Err(RequestError::ConnectionLost { .. })
    ));
    assert_eq!(sim.kinds().last().unwrap().0, "closed:peer");
}

/// A held request's answer, written by hand: `contents` after the size
/// prefix.
fn frame(contents: &[u8]) -> Vec<u8> {
    let mut f = (contents.len() as i32).to_be_bytes().to_vec();
    f.extend_from_slice(contents);
    f
}

#[test]
fn a_bad_frame_after_good_ones_fails_its_request_and_answers_those_before_it() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.request(Target::AnyBroker);
    sim.held.insert(ApiKey::ApiVersions);
    let first = sim.request(Target::AnyBroker);
    let second = sim.request(Target::AnyBroker);
    let [(conn, _, v, corr), _] = sim.unanswered[..] else {
        panic!("{:?}", sim.unanswered)
    };
    // The first request's answer and, in the same bytes, a frame that
    // answers no request in flight.
    let good = encode_response(&ApiVersionsResponse::default(), v, corr).unwrap();
    let mut bytes = good.to_vec();
    bytes.extend(frame(&(corr + 1000).to_be_bytes()));
    sim.c.handle_received(sim.now, conn, Bytes::from(bytes));
    sim.pump();
    assert!(
        matches!(sim.responses.get(&first), Some(Ok(_))),
        "{:?}",
        sim.responses.get(&first)
    );
    match sim.responses.get(&second) {
        Some(Err(RequestError::ConnectionLost { cause, .. })) => {
            assert!(cause.to_string().contains("correlation id"), "{cause}")
        }
        other => panic!("{other:?}"),
    }
    assert!(sim.sockets.is_empty());
}

#[test]
fn a_response_whose_header_cannot_be_read_fails_its_request() {
    let mut cfg = config(&["b1:9092"], None);
    cfg.request_timeout = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(1));
    sim.held.insert(ApiKey::Fetch);
    let fetch = sim.send(
        Target::Broker(1),
        Box::new(crate::protocol::messages::fetch::FetchRequest::default()),
    );
    let [(conn, api, v, corr)] = sim.unanswered[..] else {
        panic!("{:?}", sim.unanswered)
    };
    assert_eq!((api, api.response_header_version(v)), (ApiKey::Fetch, 1));
    // The correlation id matches, but the flexible header's tagged fields
    // are missing: its request fails with the connection, at once.
    sim.c
        .handle_received(sim.now, conn, Bytes::from(frame(&corr.to_be_bytes())));
    sim.pump();
    match sim.responses.get(&fetch) {
        Some(Err(e @ RequestError::ConnectionLost { cause, .. })) => {
            assert!(e.is_retriable());
            assert!(cause.to_string().contains("Fetch"), "{cause}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!sim.sockets.contains_key(&conn));
}

#[test]
fn leader_change_moves_requests_and_the_old_connection_idles_out() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(sim.c.metadata().leader("t", 0).unwrap()));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(1))]);
    // Partition 0 moves to broker 3.
    sim.leaders.insert(0, 3);
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    assert_eq!(sim.c.metadata().leader("t", 0), Some(3));
    sim.request(Target::Broker(3));
    assert_eq!(
        sim.census(),
        vec![(Purpose::Leader, Some(1)), (Purpose::Leader, Some(3))]
    );
    // Only broker 3 keeps getting traffic; broker 1's connection idles out.
    for _ in 0..4 {
        sim.advance(Duration::from_secs(3));
        sim.request(Target::Broker(3));
    }
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(3))]);
}

#[test]
fn metadata_refreshes_when_it_is_older_than_the_max_age() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    cfg.metadata_max_age = Duration::from_secs(60);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let count = |sim: &Sim| sim.served(ApiKey::Metadata);
    assert_eq!(count(&sim), 1);
    sim.advance(Duration::from_secs(59));
    assert_eq!(count(&sim), 1);
    sim.advance(Duration::from_secs(1));
    assert_eq!(count(&sim), 2);
}

#[test]
fn a_pattern_subscription_asks_for_every_topic_at_the_max_age() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    cfg.metadata_max_age = Duration::from_secs(60);
    let mut sim = Sim::new(cfg);
    sim.extra_topics.insert("u".into(), [2; 16]);
    sim.c.set_all_topics(true);
    assert!(sim.c.poll_action().is_none(), "nothing connected by itself");
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert_eq!(sim.metadata_asked.len(), 1);
    assert_eq!(
        sim.metadata_asked[0].1, None,
        "a null topic array: every topic"
    );
    let known: Vec<&String> = sim.c.metadata().topics.keys().collect();
    assert_eq!(known, ["t", "u"]);
    // No topic named, and still refreshed every metadata.max.age.ms.
    sim.advance(Duration::from_secs(59));
    assert_eq!(sim.metadata_asked.len(), 1);
    sim.extra_topics.insert("v".into(), [3; 16]);
    sim.advance(Duration::from_secs(1));
    assert_eq!(sim.metadata_asked.len(), 2);
    assert_eq!(sim.metadata_asked[1].1, None);
    assert!(
        sim.c.metadata().topics.contains_key("v"),
        "a topic created since"
    );
    // Off again: named topics only.
    sim.c.set_all_topics(false);
    sim.c.set_topics(["t".to_owned()]);
    sim.advance(Duration::from_secs(60));
    assert_eq!(
        sim.metadata_asked.last().unwrap().1,
        Some(vec![(Some("t".to_owned()), [0; 16])])
    );
}

#[test]
fn unknown_topic_ids_are_looked_up_by_id_and_kept_while_wanted() {
    const U: [u8; 16] = [2; 16];
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    cfg.metadata_max_age = Duration::from_secs(60);
    let mut sim = Sim::new(cfg);
    sim.extra_topics.insert("u".into(), U);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert!(!sim.c.metadata().topics.contains_key("u"));
    let generation = sim.c.metadata_generation();

    // A KIP-848 assignment names U: looked up at once, by id (v12+).
    sim.c.set_topic_ids([U]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert_eq!(sim.metadata_asked.len(), 2);
    assert_eq!(sim.metadata_asked[1], (13, Some(vec![(None, U)])));
    assert_eq!(sim.c.metadata().topics["u"].topic_id, U);
    assert!(
        sim.c.metadata().topics.contains_key("t"),
        "merged, not replaced"
    );
    assert!(sim.c.metadata_generation() > generation);
    // Known now: not asked again.
    sim.advance(Duration::from_secs(5));
    assert_eq!(sim.metadata_asked.len(), 2);

    // The regular refresh (by name) keeps it while the id is wanted...
    sim.advance(Duration::from_secs(55));
    assert_eq!(sim.metadata_asked.len(), 3);
    assert_eq!(
        sim.metadata_asked[2].1,
        Some(vec![(Some("t".into()), [0; 16])])
    );
    assert!(sim.c.metadata().topics.contains_key("u"));
    // ...and drops it once nobody wants it.
    sim.c.set_topic_ids([]);
    sim.advance(Duration::from_secs(60));
    assert!(!sim.c.metadata().topics.contains_key("u"));
}

#[test]
fn an_id_no_broker_knows_yet_is_asked_again_after_the_retry_backoff() {
    const X: [u8; 16] = [9; 16];
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    let mut sim = Sim::new(cfg);
    sim.c.set_topic_ids([X]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let by_id = |sim: &Sim| {
        sim.metadata_asked
            .iter()
            .filter(|(_, t)| t.as_ref().is_some_and(|t| t.iter().any(|e| e.1 == X)))
            .count()
    };
    assert_eq!(by_id(&sim), 1);
    // retry.backoff.ms (100 ms, ±20 %), not at once, not never.
    sim.advance(Duration::from_millis(79));
    assert_eq!(by_id(&sim), 1);
    let next = sim.c.poll_timeout().expect("a retry is due");
    assert!(next > sim.now, "no deadline in the past");
    sim.advance(Duration::from_millis(41));
    assert_eq!(by_id(&sim), 2);
    // The topic is created: the next lookup finds it, and that is all.
    sim.extra_topics.insert("x".into(), X);
    sim.advance(Duration::from_millis(500));
    assert_eq!(sim.c.metadata().topics["x"].topic_id, X);
    let found = by_id(&sim);
    sim.advance(Duration::from_secs(5));
    assert_eq!(by_id(&sim), found);
}

#[test]
fn below_metadata_v12_ids_are_found_in_metadata_for_every_topic() {
    const U: [u8; 16] = [2; 16];
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.metadata_max = 11;
    sim.extra_topics.insert("u".into(), U);
    sim.c.set_topic_ids([U]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    // Kafka refuses ids below v12 (INVALID_REQUEST): every topic instead.
    assert_eq!(sim.metadata_asked, vec![(11, None)]);
    assert_eq!(sim.c.metadata().topics["u"].topic_id, U);
}

#[test]
fn connection_events_serialise_for_machines() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.request(Target::AnyBroker);
    let ready = sim
        .events
        .iter()
        .find(|e| e.kind == EventKind::Ready)
        .unwrap();
    let json = serde_json::to_value(ready).unwrap();
    assert_eq!(json["event"], "ready");
    assert_eq!(json["purpose"], "bootstrap");
    assert_eq!(json["addr"], "b2:9092");
    assert!(json["t_ms"].is_u64());
}

#[test]
fn a_broker_that_drops_connections_during_the_handshake_is_backed_off() {
    let mut cfg = config(&["b1:9092"], None);
    cfg.request_timeout = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    // Connects succeed but the broker closes before answering ApiVersions.
    sim.held.insert(ApiKey::ApiVersions);
    sim.request(Target::AnyBroker);
    let mut attempts = Vec::new();
    for _ in 0..6 {
        let conn = *sim.sockets.keys().next().expect("an attempt");
        attempts.push(sim.now);
        sim.c
            .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
        sim.pump();
        assert!(sim.sockets.is_empty(), "no immediate reconnect");
        let wake = sim.c.poll_timeout().expect("a backoff deadline");
        sim.advance(wake.saturating_duration_since(sim.now));
    }
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    for (i, gap) in gaps.iter().enumerate() {
        let nominal = Duration::from_millis(50 * (1u64 << i)).min(Duration::from_millis(1000));
        assert!(
            *gap >= nominal.mul_f64(0.8) && *gap <= nominal.mul_f64(1.2),
            "gap {i}: {gap:?}, nominal {nominal:?}"
        );
    }
}

/// A known broker whose connections answer, then break the protocol
/// (garbage, a frame size no broker sends): a refusal, not an outage. It is
/// reported at once, again only after REPORT_AGAIN_AFTER, and dialled
/// again with the refusal backoff (1 s doubling to 30 s), not the
/// reconnect backoff, though each connection answered a request first.
#[test]
fn a_broker_that_keeps_breaking_the_protocol_is_backed_off_as_a_refusal() {
    let mut cfg = config(&["b1:9092"], None);
    cfg.request_timeout = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    // Broker 1 is the leader of partition 0 and gets Fetch requests.
    let start = sim.now;
    let mut reported = Vec::new();
    let mut dialled = Vec::new();
    while sim.now < start + Duration::from_secs(100) {
        sim.request(Target::Broker(1));
        if let Some((&conn, _)) = sim
            .sockets
            .iter()
            .find(|(c, a)| a.as_str() == "b1:9092" && !dialled.iter().any(|(d, _)| d == *c))
        {
            dialled.push((conn, sim.now - start));
            // The handshake's ApiVersions, then the request's.
            let answered = sim
                .log
                .iter()
                .filter(|(c, _, api)| *c == conn && *api == ApiKey::ApiVersions)
                .count();
            assert!(answered >= 2, "the connection answered before the garbage");
            sim.c.handle_closed(
                sim.now,
                conn,
                ConnectionError::protocol("frame of 2147483647 bytes exceeds the limit"),
            );
            sim.pump();
        }
        while let Some(p) = sim.c.poll_problem() {
            if let Problem::BrokerUnreachable { cause, .. } = p {
                assert!(cause.is_refusal());
                reported.push(sim.now - start);
            }
        }
        sim.advance(Duration::from_millis(100));
    }
    // 1, 2, 4, 8, 16, 30, 30 s apart (±20%): at most 5 in the first 15 s.
    let in_15 = dialled
        .iter()
        .filter(|(_, t)| *t <= Duration::from_secs(15))
        .count();
    assert!(in_15 <= 5, "{dialled:?}");
    assert!((7..=10).contains(&dialled.len()), "{dialled:?}");
    assert_eq!(
        reported.len(),
        2,
        "reported at once and after a minute: {reported:?}"
    );
    assert!(reported[1] >= REPORT_AGAIN_AFTER, "{reported:?}");
}

fn refused() -> ConnectionError {
    ConnectionError::Refused {
        message: "Connection refused (os error 111)".into(),
    }
}

/// Steps the clock from deadline to deadline for `horizon`, checking after
/// each step that the next deadline lies ahead: one in the past would make
/// the runtime wake at once, again and again (a busy loop). Returns the
/// number of steps.
fn step_through_deadlines(sim: &mut Sim, horizon: Duration) -> usize {
    let end = sim.now + horizon;
    let mut steps = 0;
    while let Some(t) = sim.c.poll_timeout() {
        assert!(
            t > sim.now,
            "step {steps}: deadline {:?} before now",
            sim.now - t
        );
        if t > end {
            break;
        }
        steps += 1;
        sim.now = t;
        sim.c.handle_timeout(sim.now);
        sim.pump();
    }
    steps
}

/// Metadata wanted for a new topic is due at once, not when the cache
/// grows old: `poll_timeout` says so to the driver, which would otherwise
/// sleep for `metadata.max.age.ms`.
#[test]
fn wanted_metadata_is_due_at_once_not_at_the_max_age() {
    let mut sim = Sim::new(config(&["b1:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert!(sim.c.metadata().topics.contains_key("t"));
    sim.now += Duration::from_secs(1);
    sim.c.set_topics(["t".to_owned(), "u".to_owned()]);
    let due = sim.c.poll_timeout().expect("a metadata deadline");
    assert!(due <= sim.now, "due {:?} from now", due - sim.now);
    sim.c.request_metadata_refresh_later();
    let due = sim.c.poll_timeout().expect("a metadata deadline");
    assert!(due <= sim.now, "due {:?} from now", due - sim.now);
}

#[test]
fn no_deadline_is_left_in_the_past_while_the_coordinator_is_down() {
    let mut sim = Sim::new(config(&["b1:9092"], Some("g")));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    // The coordinator goes down and FindCoordinator goes unanswered: the
    // next group request waits, with the coordinator's reconnect backoff
    // ending while the lookup is in flight.
    sim.refused.insert("b2:9092".into());
    sim.held.insert(ApiKey::FindCoordinator);
    let coordinator = sim
        .c
        .connections(sim.now)
        .into_iter()
        .find(|c| c.purpose == Purpose::Coordinator)
        .expect("a coordinator connection")
        .id;
    sim.c
        .handle_closed(sim.now, coordinator, ConnectionError::ClosedByBroker);
    sim.pump();
    let join = sim.request(Target::Coordinator);
    // Lookups time out after request.timeout.ms and are retried after
    // their backoff: a handful of steps in 70 s, not thousands.
    let steps = step_through_deadlines(&mut sim, Duration::from_secs(70));
    assert!((1..200).contains(&steps), "{steps} steps");
    assert!(
        matches!(
            sim.responses.get(&join),
            Some(Err(RequestError::Timeout { .. }))
        ),
        "{:?}",
        sim.responses.get(&join)
    );
    // Nothing waits for the coordinator now: the lookup's backoff, ended
    // or not, is no deadline (one left in the past would be a busy loop).
    let steps = step_through_deadlines(&mut sim, Duration::from_secs(60));
    assert!(steps < 50, "{steps} steps with nothing waiting");
}

/// A refused address is tried again only after its reconnect backoff
/// (50 ms doubling to 1 s, ±20 %): no storm of connects against a broker
/// that is down.
#[test]
fn a_refused_address_is_retried_only_after_its_backoff() {
    let mut sim = Sim::new(config(&["b1:9092"], Some("g")));
    sim.refused.insert("b1:9092".into());
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    step_through_deadlines(&mut sim, Duration::from_secs(10));
    let attempts: Vec<Duration> = sim
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ConnectFailed { .. }))
        .map(|e| e.at)
        .collect();
    // 50 ms, 100, 200, 400, 800, then 1 s each: about 15 in 10 s.
    assert!((5..=20).contains(&attempts.len()), "{attempts:?}");
    for pair in attempts.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(40),
            "retried after {:?}: {attempts:?}",
            pair[1] - pair[0]
        );
    }
}

fn problems(sim: &mut Sim) -> Vec<Problem> {
    std::iter::from_fn(|| sim.c.poll_problem()).collect()
}

/// docs/reliability.md: a known broker's connection failing once is
/// reconnected quietly; from its second failure in a row it is reported,
/// once, then again only after `REPORT_AGAIN_AFTER`.
#[test]
fn a_known_broker_is_reported_from_its_second_failure_in_a_row() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert!(problems(&mut sim).is_empty());
    sim.refused.insert("b3:9092".into());
    sim.request(Target::Broker(3));
    // The first refusal: no news.
    assert!(problems(&mut sim).is_empty());
    // The reconnect after the backoff (50 ms ± 20 %) fails too.
    sim.advance(Duration::from_millis(70));
    let reported = problems(&mut sim);
    assert!(
        matches!(
            reported.as_slice(),
            [Problem::BrokerUnreachable {
                broker: Some(3),
                purpose: Purpose::Leader,
                cause: ConnectionError::Refused { .. },
                ..
            }]
        ),
        "{reported:?}"
    );
    // It keeps failing: not reported again within REPORT_AGAIN_AFTER.
    for _ in 0..50 {
        sim.request(Target::Broker(3));
        sim.advance(Duration::from_secs(1));
    }
    assert!(problems(&mut sim).is_empty());
    for _ in 0..15 {
        sim.request(Target::Broker(3));
        sim.advance(Duration::from_secs(1));
    }
    assert_eq!(problems(&mut sim).len(), 1);
}

/// The group coordinator's broker going away is named as the coordinator,
/// whichever of its connections fails first (here its leader connection):
/// one report per address, and the group's traffic is what stops.
#[test]
fn the_coordinators_broker_is_named_as_the_coordinator() {
    let mut sim = Sim::new(config(&["b1:9092"], Some("g")));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    assert_eq!(sim.c.coordinator().map(|b| b.id), Some(2));
    assert!(problems(&mut sim).is_empty());
    sim.refused.insert("b2:9092".into());
    sim.request(Target::Broker(2));
    sim.advance(Duration::from_millis(70));
    let reported = problems(&mut sim);
    assert!(
        matches!(
            reported.as_slice(),
            [Problem::BrokerUnreachable {
                broker: Some(2),
                purpose: Purpose::Coordinator,
                ..
            }]
        ),
        "{reported:?}"
    );
}

/// Every bootstrap address refused: one report naming each address with
/// its cause (a bootstrap connection's failure is no known broker's).
#[test]
fn bootstrap_unreachable_is_reported_once_every_address_failed() {
    let mut sim = Sim::new(config(&["b1:9092", "b2:9092"], None));
    sim.refused
        .extend(["b1:9092".to_owned(), "b2:9092".to_owned()]);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    // Both addresses were tried one after the other (the second at once:
    // it was in no backoff), then reported together.
    let reported = problems(&mut sim);
    match reported.as_slice() {
        [Problem::BootstrapUnreachable { attempts }] => {
            let addrs: BTreeSet<&str> = attempts.iter().map(|(a, _)| a.as_str()).collect();
            assert_eq!(addrs, BTreeSet::from(["b1:9092", "b2:9092"]));
            assert!(attempts
                .iter()
                .all(|(_, e)| matches!(e, ConnectionError::Refused { .. })));
        }
        other => panic!("{other:?}"),
    }
    // Retried with backoff, still refused: not reported again within
    // REPORT_AGAIN_AFTER.
    step_through_deadlines(&mut sim, Duration::from_secs(10));
    assert!(problems(&mut sim).is_empty());
}

/// FindCoordinator answered with COORDINATOR_NOT_AVAILABLE: while a group
/// request waits, the lookup is retried when its backoff ends (the driver
/// wakes for it); once nothing waits, that backoff is no deadline.
#[test]
fn a_refused_coordinator_lookup_is_retried_while_requests_wait_and_only_then() {
    let mut cfg = config(&["b2:9092"], Some("g"));
    cfg.retry_backoff = ExponentialBackoff {
        base: Duration::from_millis(1000),
        max: Duration::from_millis(1000),
        jitter: 0.0,
    };
    cfg.request_timeout = Duration::from_millis(2500);
    let mut sim = Sim::new(cfg);
    sim.coordinator = -1;
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let join = sim.request(Target::Coordinator);
    let lookups = |sim: &Sim| {
        sim.log
            .iter()
            .filter(|(_, _, api)| *api == ApiKey::FindCoordinator)
            .count()
    };
    assert_eq!(lookups(&sim), 1);
    // Retried each second while the request waits: at 1 s and 2 s.
    step_through_deadlines(&mut sim, Duration::from_millis(2200));
    assert_eq!(lookups(&sim), 3);
    // The request times out at 2.5 s; the lookup's backoff then ends at
    // 3 s with nothing waiting: no retry, and no deadline left behind.
    step_through_deadlines(&mut sim, Duration::from_secs(5));
    assert!(matches!(
        sim.responses.get(&join),
        Some(Err(RequestError::Timeout { .. }))
    ));
    assert_eq!(lookups(&sim), 3);
}

#[test]
fn no_deadline_is_left_in_the_past_while_every_bootstrap_is_refused() {
    let mut sim = Sim::new(config(&["b1:9092", "b2:9092"], Some("g")));
    sim.refused
        .extend(["b1:9092".to_owned(), "b2:9092".to_owned()]);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Coordinator);
    let steps = step_through_deadlines(&mut sim, Duration::from_secs(10));
    assert!((5..200).contains(&steps), "{steps} steps");
}

#[test]
fn no_deadline_is_left_in_the_past_while_a_retried_metadata_request_waits() {
    let mut cfg = config(&["b1:9092"], None);
    cfg.metadata_max_age = Duration::from_millis(500);
    cfg.request_timeout = Duration::from_secs(2);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    // Metadata goes unanswered from now on: each request times out, closes
    // its connection, and is retried after the backoff, with the cache
    // older than its max age all the while.
    sim.held.insert(ApiKey::Metadata);
    let steps = step_through_deadlines(&mut sim, Duration::from_secs(10));
    assert!((3..200).contains(&steps), "{steps} steps");
}

/// One request of every group API, which only the coordinator answers.
fn group_requests() -> Vec<Box<dyn RequestBody>> {
    use crate::protocol::messages::{
        consumer_group_heartbeat::ConsumerGroupHeartbeatRequest, heartbeat::HeartbeatRequest,
        join_group::JoinGroupRequest, leave_group::LeaveGroupRequest,
        offset_commit::OffsetCommitRequest, offset_fetch::OffsetFetchRequest,
        sync_group::SyncGroupRequest,
    };
    vec![
        Box::new(JoinGroupRequest::default()),
        Box::new(SyncGroupRequest::default()),
        Box::new(HeartbeatRequest::default()),
        Box::new(LeaveGroupRequest::default()),
        Box::new(OffsetCommitRequest::default()),
        Box::new(OffsetFetchRequest::default()),
        Box::new(ConsumerGroupHeartbeatRequest::default()),
    ]
}

/// One request of every API that reads partitions from their leader.
fn leader_requests() -> Vec<Box<dyn RequestBody>> {
    use crate::protocol::messages::{
        fetch::FetchRequest, list_offsets::ListOffsetsRequest,
        offset_for_leader_epoch::OffsetForLeaderEpochRequest,
    };
    vec![
        Box::new(FetchRequest::default()),
        Box::new(ListOffsetsRequest::default()),
        Box::new(OffsetForLeaderEpochRequest::default()),
    ]
}

/// Sends `body` to `target` and expects it refused as a wrong target,
/// before any socket exists or any byte is sent.
fn assert_refused(sim: &mut Sim, target: Target, body: Box<dyn RequestBody>) {
    let api = body.api_key();
    let id = sim.send(target, body);
    match sim.responses.get(&id) {
        Some(Err(e @ RequestError::WrongTarget { .. })) => {
            assert_eq!(
                e,
                &RequestError::WrongTarget {
                    api,
                    target: target.to_string()
                }
            );
            assert!(!e.is_retriable());
            assert!(e.to_string().contains(api.name()), "{e}");
        }
        other => panic!("{api} to {target:?}: {other:?}"),
    }
    assert!(sim.log.is_empty(), "{api} to {target:?}: {:?}", sim.log);
    assert!(sim.sockets.is_empty(), "{api} to {target:?}");
}

#[test]
fn group_requests_are_refused_off_the_coordinator() {
    let mut sim = Sim::new(config(&["b1:9092"], Some("g")));
    for target in [Target::AnyBroker, Target::Broker(1), Target::Replica(1)] {
        for body in group_requests() {
            assert_refused(&mut sim, target, body);
        }
    }
}

#[test]
fn leader_requests_are_refused_off_leader_connections() {
    let mut sim = Sim::new(config(&["b1:9092"], Some("g")));
    for target in [Target::Coordinator, Target::AnyBroker] {
        for body in leader_requests() {
            assert_refused(&mut sim, target, body);
        }
    }
    // A read replica (KIP-392) serves Fetch only: offsets are the
    // leader's to give.
    for body in leader_requests()
        .into_iter()
        .filter(|b| b.api_key() != ApiKey::Fetch)
    {
        assert_refused(&mut sim, Target::Replica(1), body);
    }
}

#[test]
fn group_and_leader_requests_go_out_on_their_own_connections() {
    let mut cfg = config(&["b1:9092", "b2:9092", "b3:9092"], Some("g"));
    // Room for every request at once on one connection.
    cfg.max_in_flight = 10;
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    // Routing questions go anywhere.
    for target in [Target::AnyBroker, Target::Coordinator, Target::Broker(1)] {
        let id = sim.request(target);
        assert!(sim.responses[&id].is_ok(), "{target:?}");
    }
    // The simulated brokers serve neither group nor leader requests: they
    // stay in flight, and nothing else is sent after them.
    sim.held.extend(
        group_requests()
            .iter()
            .chain(leader_requests().iter())
            .map(|b| b.api_key()),
    );
    let mut sent = Vec::new();
    for body in group_requests() {
        sent.push((body.api_key(), Purpose::Coordinator, "b2:9092"));
        sim.send(Target::Coordinator, body);
    }
    for body in leader_requests() {
        sent.push((body.api_key(), Purpose::Leader, "b3:9092"));
        sim.send(Target::Broker(3), body);
    }
    assert!(
        sim.responses.values().all(|r| r.is_ok()),
        "{:?}",
        sim.responses
    );
    let purposes: BTreeMap<ConnectionId, Purpose> = sim
        .c
        .connections(sim.now)
        .into_iter()
        .map(|c| (c.id, c.purpose))
        .collect();
    for (api, purpose, addr) in sent {
        let (conn, at, _) = sim
            .log
            .iter()
            .find(|(_, _, a)| *a == api)
            .unwrap_or_else(|| panic!("{api} was not sent"));
        assert_eq!((purposes[conn], at.as_str()), (purpose, addr), "{api}");
    }
}

// ===== SASL =====

fn sasl_config(mechanism: crate::sasl::Mechanism, password: &str) -> ClusterConfig {
    let mut c = config(&["b2:9092"], None);
    c.sasl = Some(crate::sasl::SaslConfig::password(
        mechanism, "alice", password,
    ));
    // A fixed "random" source: the nonce is an input of the state machine.
    c.random_bytes = |buf| buf.fill(7);
    c
}

fn sasl_sim(mechanism: crate::sasl::Mechanism, password: &str) -> Sim {
    let mut sim = Sim::new(sasl_config(mechanism, password));
    sim.sasl = Some(SimSasl::new("alice", "alice-secret"));
    sim
}

/// The APIs sent on `conn`, in order.
fn apis_on(sim: &Sim, conn: ConnectionId) -> Vec<ApiKey> {
    sim.log
        .iter()
        .filter(|(c, _, _)| *c == conn)
        .map(|(_, _, api)| *api)
        .collect()
}

fn state_of(sim: &Sim, conn: ConnectionId) -> crate::events::ConnectionState {
    sim.c
        .connections(sim.now)
        .into_iter()
        .find(|c| c.id == conn)
        .expect("live")
        .state
}

#[test]
fn sasl_runs_after_api_versions_and_nothing_is_sent_before_it_succeeds() {
    use crate::events::ConnectionState;
    let mut sim = sasl_sim(crate::sasl::Mechanism::Plain, "alice-secret");
    sim.held.insert(ApiKey::SaslAuthenticate);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    let id = sim.request(Target::AnyBroker);
    let conn = *sim.sockets.keys().next().unwrap();
    // Metadata and the request wait in the queue while authentication runs.
    assert_eq!(
        apis_on(&sim, conn),
        [
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate
        ]
    );
    assert_eq!(state_of(&sim, conn), ConnectionState::Authenticating);
    assert!(sim.responses.is_empty());
    assert!(!sim.events.iter().any(|e| e.kind == EventKind::Ready));
    sim.release();
    assert_eq!(
        apis_on(&sim, conn)[3..].iter().collect::<BTreeSet<_>>(),
        [ApiKey::Metadata, ApiKey::ApiVersions].iter().collect()
    );
    assert!(sim.responses[&id].is_ok());
    assert_eq!(state_of(&sim, conn), ConnectionState::Ready);
    // Authenticated comes just before Ready.
    let kinds: Vec<&EventKind> = sim.events.iter().map(|e| &e.kind).collect();
    let ready = kinds.iter().position(|k| **k == EventKind::Ready).unwrap();
    assert!(matches!(
        kinds[ready - 1],
        EventKind::Authenticated {
            reauthentication: false,
            session_lifetime: None,
            ..
        }
    ));
    // The password is in no event, log line or state dump.
    assert!(!format!("{:?} {:?}", sim.events, sim.c).contains("alice-secret"));
}

#[test]
fn scram_sha_256_authenticates_in_two_round_trips() {
    let mut sim = sasl_sim(crate::sasl::Mechanism::ScramSha256, "alice-secret");
    let id = sim.request(Target::AnyBroker);
    assert!(sim.responses[&id].is_ok());
    let conn = *sim.sockets.keys().next().unwrap();
    assert_eq!(
        apis_on(&sim, conn),
        [
            ApiKey::ApiVersions,
            ApiKey::SaslHandshake,
            ApiKey::SaslAuthenticate,
            ApiKey::SaslAuthenticate,
            ApiKey::ApiVersions
        ]
    );
    assert!(sim.c.poll_problem().is_none());
}

/// A wrong password: reported at the first failure, with the broker's
/// message, and the address backed off to `reconnect.backoff.max.ms`
/// (1 s ± 20%), not reconnected in a loop; reported again only after
/// REPORT_AGAIN_AFTER.
#[test]
fn a_wrong_password_is_reported_at_once_and_backed_off_as_a_refusal() {
    for mechanism in [
        crate::sasl::Mechanism::Plain,
        crate::sasl::Mechanism::ScramSha256,
    ] {
        let mut sim = sasl_sim(mechanism, "wrong");
        // Metadata is wanted all along, as a consumer's is.
        sim.c.set_topics(["t".to_owned()]);
        let id = sim.request(Target::AnyBroker);
        assert!(sim.sockets.is_empty(), "closed after the refusal");
        match sim.c.poll_problem() {
            Some(Problem::AuthenticationFailed {
                addr,
                mechanism: m,
                message,
                purpose,
                ..
            }) => {
                assert_eq!((addr.as_str(), purpose), ("b2:9092", Purpose::Bootstrap));
                assert_eq!(m, mechanism.name());
                assert!(message.contains("Authentication failed"), "{message}");
                assert!(message.contains("SASL_AUTHENTICATION_FAILED"), "{message}");
            }
            other => panic!("{mechanism}: {other:?}"),
        }
        assert!(sim.c.poll_problem().is_none());
        let closed = sim.events.iter().find_map(|e| match &e.kind {
            EventKind::Closed {
                error: Some(e @ ConnectionError::Authentication { .. }),
                ..
            } => Some(e.clone()),
            _ => None,
        });
        assert!(closed.is_some(), "the event carries the cause");
        let connects = |sim: &Sim| {
            sim.events
                .iter()
                .filter(|e| e.kind == EventKind::Connecting)
                .count()
        };
        // No reconnect before 800 ms; one by 1200 ms.
        sim.advance(Duration::from_millis(799));
        assert_eq!(connects(&sim), 1);
        sim.advance(Duration::from_millis(401));
        assert_eq!(connects(&sim), 2);
        // The second failure is not reported again...
        assert!(sim.c.poll_problem().is_none());
        // The refusal backoff: 1 s doubling to 30 s (±20%), so attempts
        // at about 0, 1, 3, 7, 15, 31, 61 and 91 s: at most 5 in the first
        // 15 s.
        let start = sim.now - Duration::from_millis(1200);
        sim.advance(start + Duration::from_secs(15) - sim.now);
        assert!(connects(&sim) <= 5, "{}", connects(&sim));
        // Reported again at the first failure REPORT_AGAIN_AFTER after the
        // first report (the attempt at about 61 s, ±20% of its 30 s wait).
        let mut reported = None;
        while sim.now < start + Duration::from_secs(100) && reported.is_none() {
            sim.advance(Duration::from_millis(100));
            if let Some(Problem::AuthenticationFailed { .. }) = sim.c.poll_problem() {
                reported = Some(sim.now - start);
            }
        }
        let again = reported.expect("reported again");
        assert!(again >= REPORT_AGAIN_AFTER, "{again:?}");
        assert!((6..=9).contains(&connects(&sim)), "{}", connects(&sim));
        // The request waited for a connection and then timed out, naming
        // the cause.
        match &sim.responses[&id] {
            Err(RequestError::Timeout {
                last_error: Some(e),
                ..
            }) => assert!(e.contains("authentication failed"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn an_unknown_mechanism_names_the_ones_the_broker_enables() {
    let mut sim = sasl_sim(crate::sasl::Mechanism::ScramSha512, "alice-secret");
    sim.request(Target::AnyBroker);
    match sim.c.poll_problem() {
        Some(Problem::AuthenticationFailed { message, .. }) => {
            assert!(
                message.contains("does not enable SCRAM-SHA-512")
                    && message.contains("[PLAIN, SCRAM-SHA-256]")
                    && message.contains("UNSUPPORTED_SASL_MECHANISM"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    // No SaslAuthenticate was sent.
    assert!(!sim
        .log
        .iter()
        .any(|(_, _, api)| *api == ApiKey::SaslAuthenticate));
}

#[test]
fn the_setup_timeout_covers_authentication() {
    let mut sim = sasl_sim(crate::sasl::Mechanism::Plain, "alice-secret");
    sim.held.insert(ApiKey::SaslAuthenticate);
    sim.request(Target::AnyBroker);
    assert_eq!(sim.sockets.len(), 1);
    // socket.connection.setup.timeout.ms is 10 s ± 20%, well inside the
    // 30 s request timeout; the driver is told to wake for it (a setup
    // deadline left out of `poll_timeout` would be acted on only when
    // something else woke the driver).
    let due = sim.c.poll_timeout().expect("a setup deadline");
    assert!(
        due - sim.now <= Duration::from_secs(12),
        "woken after {:?}",
        due - sim.now
    );
    sim.advance(Duration::from_secs(12));
    assert!(sim.sockets.is_empty());
    let cause = sim.events.iter().find_map(|e| match &e.kind {
        EventKind::Closed { error, .. } => error.clone(),
        _ => None,
    });
    assert_eq!(cause, Some(ConnectionError::SetupTimeout));
}

/// KIP-368: with a session lifetime, the client authenticates again on
/// the same connection at 85-95% of it; requests made meanwhile wait
/// until it is done.
#[test]
fn the_session_is_renewed_on_the_same_connection_before_it_ends() {
    use crate::events::ConnectionState;
    let mut cfg = sasl_config(crate::sasl::Mechanism::ScramSha256, "alice-secret");
    cfg.connections_max_idle = None;
    let mut sim = Sim::new(cfg);
    let mut sasl = SimSasl::new("alice", "alice-secret");
    sasl.lifetime_ms = 10_000;
    sim.sasl = Some(sasl);
    sim.request(Target::AnyBroker);
    let conn = *sim.sockets.keys().next().unwrap();
    let handshakes = |sim: &Sim| {
        apis_on(sim, conn)
            .iter()
            .filter(|a| **a == ApiKey::SaslHandshake)
            .count()
    };
    assert_eq!(handshakes(&sim), 1);
    // The re-authentication is a deadline of its own.
    let due = sim.c.poll_timeout().expect("a re-authentication deadline");
    let after = due - sim.now;
    assert!(
        after >= Duration::from_millis(8_500) && after <= Duration::from_millis(9_500),
        "{after:?}"
    );
    sim.advance(Duration::from_millis(8_499));
    assert_eq!(handshakes(&sim), 1);
    // The broker holds the renewal's SaslAuthenticate: a request made
    // meanwhile is not sent.
    sim.held.insert(ApiKey::SaslAuthenticate);
    sim.advance(after - Duration::from_millis(8_499));
    assert_eq!(handshakes(&sim), 2);
    assert_eq!(state_of(&sim, conn), ConnectionState::Authenticating);
    let before = sim.log.len();
    let id = sim.request(Target::AnyBroker);
    assert_eq!(
        sim.log[before..]
            .iter()
            .map(|(_, _, a)| *a)
            .collect::<Vec<_>>(),
        Vec::<ApiKey>::new(),
        "nothing but SASL while the session is renewed, and no new socket"
    );
    sim.release();
    assert!(sim.responses[&id].is_ok());
    assert_eq!(sim.sockets.keys().copied().collect::<Vec<_>>(), [conn]);
    let renewed = sim.events.iter().any(|e| {
        matches!(
            e.kind,
            EventKind::Authenticated {
                reauthentication: true,
                ..
            }
        ) && e.connection == conn
    });
    assert!(renewed);
    // Only one Connecting event: the socket stayed.
    assert_eq!(
        sim.events
            .iter()
            .filter(|e| e.kind == EventKind::Connecting)
            .count(),
        1
    );
    // And the next renewal is scheduled again.
    let next = sim.c.poll_timeout().expect("the next renewal") - sim.now;
    assert!(next >= Duration::from_millis(8_500), "{next:?}");
    let steps = step_through_deadlines(&mut sim, Duration::from_secs(60));
    assert!((5..=8).contains(&steps), "{steps} renewals in 60 s");
    assert_eq!(sim.sockets.len(), 1);
}

// ===== OAUTHBEARER with an asynchronous token provider =====

/// A configuration with OAUTHBEARER tokens from an asynchronous provider
/// (the simulation never runs its future: the test answers each
/// `FetchOAuthToken` with `handle_oauth_token`), on one bootstrap
/// address, with no idle reaping.
fn oauth_sim() -> Sim {
    let provider = crate::sasl::OAuthTokenProvider::new_async(|| async {
        Err::<crate::sasl::OAuthToken, _>("not run in the simulation".to_owned())
    });
    let mut cfg = config(&["b2:9092"], None);
    cfg.connections_max_idle = None;
    cfg.sasl = Some(crate::sasl::SaslConfig::oauthbearer(provider));
    let mut sim = Sim::new(cfg);
    let mut sasl = SimSasl::new("alice", "alice-secret");
    sasl.mechanisms = vec![crate::sasl::Mechanism::OAuthBearer];
    sim.sasl = Some(sasl);
    sim
}

fn token(value: &str, lifetime: Duration) -> crate::sasl::OAuthToken {
    crate::sasl::OAuthToken::new(value, lifetime)
}

/// Hands the answer to the last `FetchOAuthToken` in.
fn answer_token(sim: &mut Sim, answer: Result<crate::sasl::OAuthToken, String>) {
    sim.c.handle_oauth_token(sim.now, answer);
    sim.pump();
}

/// The OAUTHBEARER tokens the brokers received, per connection.
fn tokens_on(sim: &Sim, conn: ConnectionId) -> Vec<String> {
    sim.sasl
        .as_ref()
        .unwrap()
        .tokens
        .iter()
        .filter(|(c, _)| *c == conn)
        .map(|(_, t)| t.clone())
        .collect()
}

fn connecting_events(sim: &Sim) -> usize {
    sim.events
        .iter()
        .filter(|e| e.kind == EventKind::Connecting)
        .count()
}

/// The cluster asks the runtime for the token (an action) instead of
/// calling the provider; the connection waits after SaslHandshake, with
/// nothing due meanwhile (no busy loop), and its exchange starts when the
/// token is handed in. A fresh token serves the next connections without
/// another call.
#[test]
fn a_connection_waits_in_sasl_for_the_async_token_and_fresh_tokens_are_reused() {
    use crate::events::ConnectionState;
    let mut sim = oauth_sim();
    sim.c.set_topics(["t".to_owned()]);
    let id = sim.request(Target::AnyBroker);
    let conn = *sim.sockets.keys().next().unwrap();
    assert_eq!(
        apis_on(&sim, conn),
        [ApiKey::ApiVersions, ApiKey::SaslHandshake]
    );
    assert_eq!(state_of(&sim, conn), ConnectionState::Authenticating);
    assert_eq!(sim.token_asks, [sim.now]);
    // Only the setup timeout is due while the token is awaited, and
    // stepping to it asks nothing more of the provider.
    let due = sim.c.poll_timeout().expect("the setup deadline");
    assert!(
        due - sim.now >= Duration::from_secs(8),
        "{:?}",
        due - sim.now
    );
    sim.advance(Duration::from_secs(1));
    assert_eq!(sim.token_asks.len(), 1);
    assert!(sim.responses.is_empty());
    answer_token(&mut sim, Ok(token("good-1", Duration::from_secs(600))));
    assert_eq!(tokens_on(&sim, conn), ["good-1"]);
    assert!(sim.responses[&id].is_ok());
    assert_eq!(state_of(&sim, conn), ConnectionState::Ready);
    // A leader connection authenticates at once with the same token.
    let id = sim.request(Target::Broker(1));
    assert!(sim.responses[&id].is_ok());
    let leader = *sim.sockets.keys().find(|c| **c != conn).unwrap();
    assert_eq!(tokens_on(&sim, leader), ["good-1"]);
    assert_eq!(sim.token_asks.len(), 1);
    assert!(sim.c.poll_problem().is_none());
    assert!(!format!("{:?} {:?}", sim.events, sim.c).contains("good-1"));
}

/// Two connections that need a token while one is on its way share that
/// one call; and the token is asked for again at 80% of its lifetime, a
/// deadline of its own, while connections live.
#[test]
fn connections_waiting_for_a_token_share_one_call_and_renewal_is_due_at_80_percent() {
    let mut sim = oauth_sim();
    sim.c.set_topics(["t".to_owned()]);
    sim.request(Target::AnyBroker);
    let start = sim.now;
    answer_token(&mut sim, Ok(token("good-1", Duration::from_secs(10))));
    assert_eq!(sim.token_asks.len(), 1);
    // The renewal is the next deadline: at 8 s exactly.
    assert_eq!(sim.c.poll_timeout(), Some(start + Duration::from_secs(8)));
    sim.advance(Duration::from_millis(7_999));
    assert_eq!(sim.token_asks.len(), 1);
    sim.advance(Duration::from_millis(1));
    assert_eq!(sim.token_asks, [start, start + Duration::from_secs(8)]);
    // Unanswered: nothing more is due for it (the runtime's own timeout
    // bounds the call), and nothing else asks again.
    let due = sim.c.poll_timeout();
    assert!(
        due.is_none_or(|t| t > sim.now + Duration::from_secs(60)),
        "{due:?}"
    );
    // The token expires at 10 s; two new connections then wait, and share
    // the call already out.
    sim.advance(Duration::from_secs(3));
    let one = sim.request(Target::Broker(1));
    let three = sim.request(Target::Broker(3));
    assert_eq!(sim.sockets.len(), 3);
    assert_eq!(sim.token_asks.len(), 2);
    assert!(!sim.responses.contains_key(&one) && !sim.responses.contains_key(&three));
    answer_token(&mut sim, Ok(token("good-2", Duration::from_secs(10))));
    assert!(sim.responses[&one].is_ok() && sim.responses[&three].is_ok());
    let leaders: Vec<ConnectionId> = sim.sockets.keys().skip(1).copied().collect();
    for conn in leaders {
        assert_eq!(tokens_on(&sim, conn), ["good-2"]);
    }
    assert_eq!(sim.token_asks.len(), 2);
}

/// KIP-368 re-authentications use the token at hand while it lasts: the
/// renewal asked for at 80% of the token's lifetime is there before the
/// session after it is renewed, so no re-authentication waits for the
/// provider.
#[test]
fn reauthentication_finds_the_token_renewed_ahead() {
    let mut sim = oauth_sim();
    sim.sasl.as_mut().unwrap().lifetime_ms = 5_000;
    sim.request(Target::AnyBroker);
    let conn = *sim.sockets.keys().next().unwrap();
    let start = sim.now;
    answer_token(&mut sim, Ok(token("good-1", Duration::from_secs(10))));
    let mut renewals = 0;
    while sim.now < start + Duration::from_secs(30) {
        let t = sim.c.poll_timeout().expect("a renewal is always due");
        assert!(t > sim.now);
        sim.now = t;
        sim.c.handle_timeout(sim.now);
        sim.pump();
        // Each token asked for is answered at once, as a fast provider's.
        while sim.token_asks.len() > renewals + 1 {
            renewals += 1;
            let value = format!("good-{}", renewals + 1);
            answer_token(&mut sim, Ok(token(&value, Duration::from_secs(10))));
        }
        // No connection ever waits for a token after the first one.
        assert!(!sim.c.conns.awaiting_token());
    }
    // A renewal every 8 s: at 8, 16 and 24 s.
    let asked: Vec<Duration> = sim.token_asks.iter().map(|t| *t - start).collect();
    assert_eq!(
        asked,
        [0, 8, 16, 24].map(Duration::from_secs),
        "{renewals} renewals"
    );
    let seen = tokens_on(&sim, conn);
    // Sessions of 5 s renewed at 85-95%: at least 6 authentications in
    // 30 s, every token used, in order, on the same socket.
    assert!(seen.len() >= 6, "{seen:?}");
    let mut distinct = seen.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        ["good-1", "good-2", "good-3", "good-4"],
        "{seen:?}"
    );
    assert_eq!(connecting_events(&sim), 1);
}

/// A renewal ahead of need that fails leaves the token in use (it still
/// lasts) and is asked again after the reconnect backoff, growing while it
/// fails: never in a loop.
#[test]
fn a_failed_renewal_keeps_the_token_and_is_asked_again_after_backoff() {
    let mut sim = oauth_sim();
    sim.request(Target::AnyBroker);
    let start = sim.now;
    answer_token(&mut sim, Ok(token("good-1", Duration::from_secs(100))));
    sim.advance(Duration::from_secs(80));
    assert_eq!(sim.token_asks.len(), 2);
    let mut answered = 2;
    answer_token(&mut sim, Err("token endpoint: timeout".into()));
    while sim.now < start + Duration::from_secs(85) {
        sim.advance(Duration::from_millis(5));
        while sim.token_asks.len() > answered {
            answered += 1;
            assert!(answered < 50, "called in a loop: {:?}", sim.token_asks);
            answer_token(&mut sim, Err("token endpoint: timeout".into()));
        }
    }
    let gaps: Vec<Duration> = sim.token_asks[1..]
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    // 50 ms, 100 ms, 200 ms, ... to 1 s (±20%).
    assert!((4..=10).contains(&gaps.len()), "{gaps:?}");
    for (i, gap) in gaps.iter().enumerate() {
        let step = Duration::from_millis(50 << i.min(4)).min(Duration::from_secs(1));
        assert!(*gap >= step.mul_f64(0.8), "{gaps:?}");
    }
    // Nothing was closed or reported: the token still serves, and a new
    // connection authenticates with it at once.
    assert!(sim.c.poll_problem().is_none());
    let id = sim.request(Target::Bootstrap);
    assert!(sim.responses[&id].is_ok());
    assert_eq!(connecting_events(&sim), 1);
}

/// A provider that fails closes the connections that waited with a cause
/// that names it and is not a refusal, reported at once; the provider is
/// called again only after the reconnect backoff (50 ms doubling to 1 s),
/// so one that always fails is called at that pace, not in a loop; once
/// it answers, the connection authenticates and the request goes out.
#[test]
fn a_failing_async_provider_is_reported_retriable_and_called_at_backoff_pace() {
    let mut sim = oauth_sim();
    sim.c.set_topics(["t".to_owned()]);
    let id = sim.request(Target::AnyBroker);
    let start = sim.now;
    answer_token(
        &mut sim,
        Err("token endpoint: 503 Service Unavailable".into()),
    );
    assert!(sim.sockets.is_empty(), "closed");
    let cause = sim.events.iter().find_map(|e| match &e.kind {
        EventKind::Closed {
            error: Some(e @ ConnectionError::TokenProvider { .. }),
            ..
        } => Some(e.clone()),
        _ => None,
    });
    let cause = cause.expect("the close names the provider");
    assert!(!cause.is_refusal());
    assert_eq!(
        cause.to_string(),
        "SASL OAUTHBEARER authentication failed: the OAUTHBEARER token provider failed: \
         token endpoint: 503 Service Unavailable"
    );
    match sim.c.poll_problem() {
        Some(Problem::BrokerUnreachable {
            addr,
            purpose,
            cause: c,
            ..
        }) => {
            assert_eq!((addr.as_str(), purpose), ("b2:9092", Purpose::Bootstrap));
            assert_eq!(c, cause);
        }
        other => panic!("{other:?}"),
    }
    // The next attempt comes after the backoff (50 ms ± 20%), not before.
    sim.advance(Duration::from_millis(39));
    assert_eq!((sim.token_asks.len(), connecting_events(&sim)), (1, 1));
    // Always failing for 5 s: every call answered with an error.
    let mut answered = 1;
    while sim.now < start + Duration::from_secs(5) {
        sim.advance(Duration::from_millis(5));
        while sim.token_asks.len() > answered {
            answered += 1;
            assert!(answered < 50, "called in a loop: {:?}", sim.token_asks);
            answer_token(&mut sim, Err("token endpoint: 503".into()));
        }
    }
    // 50 ms doubling to 1 s (±20%): about 0.05, 0.15, 0.35, 0.75, 1.55,
    // then every second: 8 or so calls in 5 s, never a loop.
    let calls = sim.token_asks.len();
    assert!(
        (5..=10).contains(&calls),
        "{calls} calls: {:?}",
        sim.token_asks
    );
    for pair in sim.token_asks.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(40),
            "{:?}",
            sim.token_asks
        );
    }
    // Reported once (again only after REPORT_AGAIN_AFTER).
    assert!(sim.c.poll_problem().is_none());
    // The endpoint is back: the next call's token is used.
    while sim.token_asks.len() == answered {
        sim.advance(Duration::from_millis(10));
    }
    answer_token(&mut sim, Ok(token("good-1", Duration::from_secs(600))));
    assert!(sim.responses[&id].is_ok(), "{:?}", sim.responses.get(&id));
    assert!(sim.c.metadata().topics.contains_key("t"));
}

/// A synchronous provider's `Err` (or panic) fails the authentication
/// with the same retriable cause, backed off as a connection failure, not
/// as a refusal.
#[test]
fn a_failing_sync_provider_is_a_retriable_connection_failure_too() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let provider = crate::sasl::OAuthTokenProvider::new(move || {
        match counted.fetch_add(1, Ordering::SeqCst) {
            0 => Err("no token yet".into()),
            1 => panic!("the provider's bug"),
            _ => Ok(crate::sasl::OAuthToken::new(
                "good-sync",
                Duration::from_secs(60),
            )),
        }
    });
    let mut cfg = config(&["b2:9092"], None);
    cfg.sasl = Some(crate::sasl::SaslConfig::oauthbearer(provider));
    let mut sim = Sim::new(cfg);
    let mut sasl = SimSasl::new("alice", "alice-secret");
    sasl.mechanisms = vec![crate::sasl::Mechanism::OAuthBearer];
    sim.sasl = Some(sasl);
    let id = sim.request(Target::AnyBroker);
    let causes = |sim: &Sim| -> Vec<String> {
        sim.events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::Closed {
                    error: Some(ConnectionError::TokenProvider { message, .. }),
                    ..
                } => Some(message.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(causes(&sim), ["no token yet"]);
    assert!(
        sim.token_asks.is_empty(),
        "called inline, not through the runtime"
    );
    // The reconnect backoff, not the refusal backoff (1 s): within 100 ms.
    sim.advance(Duration::from_millis(100));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        causes(&sim),
        ["no token yet", "the provider panicked: the provider's bug"]
    );
    sim.advance(Duration::from_millis(200));
    assert!(sim.responses[&id].is_ok());
    let conn = *sim.sockets.keys().next().unwrap();
    assert_eq!(tokens_on(&sim, conn), ["good-sync"]);
}

/// The bootstrap list is walked in its order, one address after the other,
/// from a random start (docs/connections.md, rule 2): the attempts of a round are a
/// rotation of the list.
#[test]
fn bootstrap_addresses_are_walked_in_order_from_a_random_start() {
    let addrs: Vec<String> = (0..7).map(|i| format!("h{i}:9092")).collect();
    let refs: Vec<&str> = addrs.iter().map(String::as_str).collect();
    let mut firsts = BTreeSet::new();
    for seed in 0..20 {
        let mut c = Cluster::new(config(&refs, None), Instant::now(), seed);
        c.request(
            Instant::now(),
            Target::AnyBroker,
            Box::new(ApiVersionsRequest::from_this_client()),
        );
        let first = std::iter::from_fn(|| c.poll_action()).find_map(|a| match a {
            Action::Connect { addr, .. } => Some(addr),
            _ => None,
        });
        firsts.insert(first.expect("a connect"));
    }
    assert!(firsts.len() >= 3, "the start is not random: {firsts:?}");

    let mut sim = Sim::new(config(&refs, None));
    sim.refused.extend(addrs.iter().cloned());
    sim.request(Target::AnyBroker);
    let mut order: Vec<usize> = Vec::new();
    let end = sim.now + Duration::from_secs(10);
    while order.len() < addrs.len() && sim.now < end {
        for e in std::mem::take(&mut sim.events) {
            if matches!(e.kind, EventKind::ConnectFailed { .. }) {
                order.push(addrs.iter().position(|a| *a == e.addr).unwrap());
            }
        }
        sim.advance(Duration::from_millis(10));
    }
    assert!(order.len() >= addrs.len(), "{order:?}");
    for pair in order[..addrs.len()].windows(2) {
        assert_eq!(
            pair[1],
            (pair[0] + 1) % addrs.len(),
            "not the next address in the list: {order:?}"
        );
    }
}

// ===== read replicas (KIP-392) =====

#[test]
fn a_read_replica_gets_a_connection_of_its_own_purpose() {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(1));
    // Broker 3 leads partition 1 and is partition 0's read replica: a
    // leader connection and a replica connection, each with its purpose.
    sim.request(Target::Broker(3));
    sim.held.insert(ApiKey::Fetch);
    let fetch = sim.send(
        Target::Replica(3),
        Box::new(crate::protocol::messages::fetch::FetchRequest::default()),
    );
    assert_eq!(
        sim.census(),
        vec![
            (Purpose::Leader, Some(1)),
            (Purpose::Leader, Some(3)),
            (Purpose::Replica, Some(3))
        ]
    );
    let replica = sim
        .c
        .connections(sim.now)
        .into_iter()
        .find(|c| c.purpose == Purpose::Replica)
        .unwrap();
    assert_eq!(replica.addr, "b3:9092");
    // The Fetch went out on it (the simulated broker never answers one).
    assert!(sim
        .log
        .iter()
        .any(|(c, _, api)| *c == replica.id && *api == ApiKey::Fetch));
    assert!(!sim.responses.contains_key(&fetch));
    let steps: Vec<String> = sim
        .events
        .iter()
        .filter(|e| e.connection == replica.id)
        .map(|e| format!("{:?} {}", e.kind, e.purpose).to_lowercase())
        .collect();
    assert_eq!(
        steps,
        ["connecting replica", "opened replica", "ready replica"]
    );
    assert_eq!(sim.c.counters()["b3:9092"].connects, 2);
}

#[test]
fn a_read_replica_that_cannot_be_had_fails_at_once() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.request_timeout = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let unavailable = |sim: &Sim, id: RequestId| match &sim.responses[&id] {
        Err(e @ RequestError::ReplicaUnavailable { broker, reason }) => {
            assert!(e.is_retriable());
            (*broker, reason.clone())
        }
        other => panic!("{other:?}"),
    };
    // A broker the metadata does not know: no socket.
    let id = sim.request(Target::Replica(9));
    assert_eq!(
        unavailable(&sim, id),
        (9, "the broker is not in the metadata".to_owned())
    );
    assert_eq!(sim.census(), vec![(Purpose::Bootstrap, Some(2))]);
    // A broker that refuses: the request queued on the attempt fails with
    // it instead of waiting for a reconnect.
    sim.refused.insert("b3:9092".into());
    let id = sim.request(Target::Replica(3));
    let (broker, reason) = unavailable(&sim, id);
    assert_eq!(broker, 3);
    assert!(
        reason.contains("b3:9092") && reason.contains("refused"),
        "{reason}"
    );
    // While its address backs off, no attempt at all.
    let connects = sim.c.counters()["b3:9092"].connects;
    let id = sim.request(Target::Replica(3));
    assert!(unavailable(&sim, id).1.contains("backoff"));
    assert_eq!(sim.c.counters()["b3:9092"].connects, connects);
    // A leader request to the same broker waits for it instead.
    let leader = sim.request(Target::Broker(3));
    assert!(!sim.responses.contains_key(&leader));
    sim.refused.clear();
    let wake = sim.c.poll_timeout().unwrap();
    sim.advance(wake.saturating_duration_since(sim.now));
    assert!(sim.responses[&leader].is_ok());
}

#[test]
fn a_lost_replica_connection_fails_what_was_queued_on_it() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.max_in_flight = 1;
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Replica(3));
    // One request in flight (never answered), one queued behind it.
    sim.held.insert(ApiKey::Fetch);
    let body = || Box::new(crate::protocol::messages::fetch::FetchRequest::default());
    let first = sim.send(Target::Replica(3), body());
    let second = sim.send(Target::Replica(3), body());
    let conn = sim
        .c
        .connections(sim.now)
        .into_iter()
        .find(|c| c.purpose == Purpose::Replica)
        .unwrap()
        .id;
    sim.c
        .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
    sim.pump();
    assert!(matches!(
        sim.responses[&first],
        Err(RequestError::ConnectionLost { .. })
    ));
    assert!(matches!(
        sim.responses[&second],
        Err(RequestError::ReplicaUnavailable { broker: 3, .. })
    ));
    assert!(!sim.census().iter().any(|(p, _)| *p == Purpose::Replica));
    assert_eq!(sim.c.replica_generations(), &BTreeMap::from([(3, 1)]));
    assert!(sim.c.leader_generations().is_empty());
}

#[test]
fn with_every_partition_read_from_replicas_the_leader_connection_idles_out() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.metadata_max_age = Duration::from_secs(3600);
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(1));
    sim.request(Target::Replica(3));
    assert_eq!(
        sim.census(),
        vec![(Purpose::Leader, Some(1)), (Purpose::Replica, Some(3))]
    );
    // Only the replica keeps getting traffic: the leader connection is
    // closed as idle at exactly connections.max.idle.ms, the replica's is
    // not.
    for _ in 0..3 {
        sim.advance(Duration::from_secs(3));
        sim.request(Target::Replica(3));
    }
    sim.advance(Duration::from_secs(1));
    assert_eq!(sim.census(), vec![(Purpose::Replica, Some(3))]);
    assert!(sim
        .kinds()
        .iter()
        .any(|(k, p, a)| k == "closed:idle" && *p == Purpose::Leader && a == "b1:9092"));
    assert_eq!(sim.c.leader_generations(), &BTreeMap::from([(1, 1)]));
    // Metadata then goes over the replica connection: no bootstrap
    // connection, and no leader connection reopened for it.
    let before = sim.log.len();
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    let metadata: Vec<&String> = sim.log[before..]
        .iter()
        .filter(|(_, _, api)| *api == ApiKey::Metadata)
        .map(|(_, addr, _)| addr)
        .collect();
    assert_eq!(metadata, vec!["b3:9092"]);
    assert_eq!(sim.census(), vec![(Purpose::Replica, Some(3))]);
    // And a replica connection idles out like any other.
    sim.advance(Duration::from_secs(10));
    assert!(sim.census().is_empty());
    assert_eq!(sim.c.replica_generations(), &BTreeMap::from([(3, 1)]));
}

#[test]
fn a_bootstrap_connection_reaching_a_read_replica_is_promoted() {
    let mut sim = Sim::new(config(&["b3:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert_eq!(sim.census(), vec![(Purpose::Bootstrap, Some(3))]);
    sim.request(Target::Replica(3));
    assert_eq!(sim.census(), vec![(Purpose::Replica, Some(3))]);
    assert_eq!(sim.c.counters()["b3:9092"].connects, 1);
    assert!(sim
        .kinds()
        .iter()
        .any(|(k, p, _)| k == "promoted" && *p == Purpose::Replica));
}

// ===== requests the broker does not answer (Produce with acks=0) =====

/// A Produce with acks=0 to broker 1 of a ready cluster (Kafka answers it
/// nothing), the sockets reporting writes unless `unwritten`; its id.
fn unanswered_produce(unwritten: bool) -> (Sim, RequestId) {
    let mut sim = Sim::new(config(&["b2:9092"], None));
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    sim.request(Target::Broker(1));
    sim.held.insert(ApiKey::Produce);
    sim.unwritten = unwritten;
    let produce = crate::protocol::messages::produce::ProduceRequest {
        acks: 0,
        ..Default::default()
    };
    let id = sim
        .c
        .request_unanswered(sim.now, Target::Broker(1), Box::new(produce));
    sim.pump();
    assert!(sim.log.iter().any(|(_, _, api)| *api == ApiKey::Produce));
    (sim, id)
}

#[test]
fn an_unanswered_request_completes_once_written_and_waits_for_nothing() {
    let (mut sim, id) = unanswered_produce(false);
    let done = sim.responses[&id].as_ref().expect("done once written");
    assert_eq!((done.api, done.broker), (ApiKey::Produce, Some(1)));
    assert!(done.body.is_empty());
    // Nothing is in flight for it: the next answer on the connection is
    // matched to the next request, and nothing times out later.
    let next = sim.request(Target::Broker(1));
    assert!(sim.responses[&next].is_ok(), "{:?}", sim.responses[&next]);
    sim.now += Duration::from_secs(60);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert!(sim.events.iter().all(|e| !matches!(
        e.kind,
        EventKind::Closed {
            reason: CloseReason::Error,
            ..
        }
    )));
}

#[test]
fn an_unanswered_request_not_yet_written_is_not_done_and_fails_with_its_connection() {
    let (mut sim, id) = unanswered_produce(true);
    assert!(!sim.responses.contains_key(&id), "done before written");
    // The socket breaks before it took the bytes: the request fails with
    // the connection's cause, so that its sender can decide.
    let conn = *sim
        .log
        .iter()
        .rev()
        .find(|(_, _, api)| *api == ApiKey::Produce)
        .map(|(conn, _, _)| conn)
        .expect("a Produce written");
    sim.c
        .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
    sim.pump();
    assert!(
        matches!(sim.responses[&id], Err(RequestError::ConnectionLost { .. })),
        "{:?}",
        sim.responses[&id]
    );
}

/// The Metadata requests sent after the first `from` entries of the log:
/// the address each went to.
fn metadata_sent_to(sim: &Sim, from: usize) -> Vec<String> {
    sim.log[from..]
        .iter()
        .filter(|(_, _, api)| *api == ApiKey::Metadata)
        .map(|(_, addr, _)| addr.clone())
        .collect()
}

/// How many connections were opened to `addr`.
fn connects_to(sim: &Sim, addr: &str) -> usize {
    sim.events
        .iter()
        .filter(|e| e.addr == addr && e.kind == EventKind::Connecting)
        .count()
}

/// A client bootstrapped from `boot:9092` (with
/// `metadata.recovery.strategy=rebootstrap`, or `none`) that ends with a
/// leader connection to broker 1 alone, the bootstrap one retired.
fn leader_1_through_boot(rebootstrap: bool) -> Sim {
    let mut cfg = config(&["boot:9092"], None);
    if !rebootstrap {
        cfg.rebootstrap = None;
    }
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.request(Target::Broker(1));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(1))]);
    sim
}

/// KIP-1102: an answer whose top-level error is REBOOTSTRAP_REQUIRED is
/// not taken, and the next regular request goes, after the retry backoff,
/// to a bootstrap address although a leader connection is ready; that
/// bootstrap connection is retired again once it answered. With
/// `metadata.recovery.strategy=none` the known broker is asked again.
#[test]
fn rebootstrap_required_sends_the_next_metadata_to_a_bootstrap_address() {
    for rebootstrap in [true, false] {
        let mut sim = leader_1_through_boot(rebootstrap);

        sim.metadata_error = ErrorCode::RebootstrapRequired;
        // What the refusing answer lists beside its error is not taken.
        sim.leaders.insert(0, 3);
        let from = sim.log.len();
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
        assert_eq!(metadata_sent_to(&sim, from), ["b1:9092"]);
        assert_eq!(sim.c.metadata().leader("t", 0), Some(1));

        sim.metadata_error = ErrorCode::None;
        // Not asked again before the retry backoff (100 ms, jitter 0.2).
        sim.advance(Duration::from_millis(70));
        assert_eq!(metadata_sent_to(&sim, from).len(), 1);
        sim.advance(Duration::from_millis(100));
        let expected = if rebootstrap { "boot:9092" } else { "b1:9092" };
        assert_eq!(metadata_sent_to(&sim, from), ["b1:9092", expected]);
        assert_eq!(sim.c.metadata().leader("t", 0), Some(3));
        assert_eq!(connects_to(&sim, "boot:9092"), 1 + usize::from(rebootstrap));
        // Then metadata flows over the leader connection again: the
        // bootstrap connection is retired.
        assert_eq!(sim.census(), vec![(Purpose::Leader, Some(1))]);
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
        assert_eq!(metadata_sent_to(&sim, from).last().unwrap(), "b1:9092");
    }
}

/// KIP-1102's trigger: once the regular request has gone unanswered for
/// `metadata.recovery.rebootstrap.trigger.ms`, the next one goes to a
/// bootstrap address instead of another known broker; under the trigger,
/// the other known broker is asked.
#[test]
fn metadata_unanswered_past_the_trigger_goes_to_a_bootstrap_address() {
    for trigger in [Duration::from_secs(5), Duration::from_secs(300)] {
        let mut cfg = config(&["boot:9092"], None);
        cfg.rebootstrap = Some(trigger);
        // Broker 3's connection stays through the wait.
        cfg.connections_max_idle = None;
        let mut sim = Sim::new(cfg);
        sim.c.set_topics(["t".to_owned()]);
        sim.c.handle_timeout(sim.now);
        sim.request(Target::Broker(1));
        sim.request(Target::Broker(3));
        assert_eq!(
            sim.census(),
            vec![(Purpose::Leader, Some(1)), (Purpose::Leader, Some(3))]
        );
        let from = sim.log.len();
        sim.held.insert(ApiKey::Metadata);
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
        let first = metadata_sent_to(&sim, from);
        assert_eq!(first.len(), 1);
        sim.held.clear();
        // The request times out (30 s): its connection closes, and the
        // request goes out again.
        sim.advance(Duration::from_secs(31));
        let sent = metadata_sent_to(&sim, from);
        assert_eq!(sent.len(), 2, "{sent:?}");
        if trigger < Duration::from_secs(30) {
            assert_eq!(sent[1], "boot:9092");
        } else {
            assert_ne!(sent[1], first[0]);
            assert!(
                sent[1].starts_with('b') && sent[1] != "boot:9092",
                "{sent:?}"
            );
        }
        // Answered: the trigger starts again; the next request goes to a
        // known broker.
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
        assert_eq!(metadata_sent_to(&sim, from).last().unwrap(), "b3:9092");
        assert_eq!(sim.census(), vec![(Purpose::Leader, Some(3))]);
    }
}

/// KIP-899: when the addresses reach another cluster (its id changed), the
/// old cluster's metadata goes whole, leader epochs included (the new
/// cluster counts its own), and so do the connections to its brokers; the
/// connection that answered serves as a bootstrap connection.
#[test]
fn another_cluster_behind_the_addresses_replaces_the_old_one_whole() {
    let mut sim = Sim::new(config(&["boot:9092"], None));
    sim.leader_epoch = 7;
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.request(Target::Broker(1));
    sim.request(Target::Broker(3));
    let epoch = |sim: &Sim| sim.c.metadata().topics["t"].partitions[&0].leader_epoch;
    assert_eq!(epoch(&sim), 7);

    sim.cluster_id = Some("another".into());
    sim.brokers = (1..=3).map(|id| (id, format!("c{id}:9092"))).collect();
    sim.leader_epoch = 0;
    sim.c.request_metadata_refresh(sim.now);
    sim.pump();
    assert_eq!(epoch(&sim), 0);
    assert_eq!(sim.c.metadata().cluster_id.as_deref(), Some("another"));
    assert_eq!(sim.c.metadata().brokers[&1].addr(), "c1:9092");
    let kinds = sim.kinds();
    assert!(
        kinds
            .iter()
            .any(|(k, p, a)| k == "closed:retired" && *p == Purpose::Leader && a.starts_with('b')),
        "{kinds:?}"
    );
    // Broker 1 of the new cluster gets a connection of its own; the old
    // address's connection is retired.
    sim.request(Target::Broker(1));
    assert_eq!(sim.census(), vec![(Purpose::Leader, Some(1))]);
    assert_eq!(sim.sockets.values().collect::<Vec<_>>(), ["c1:9092"]);
}

/// With `metadata.recovery.strategy=none`, once
/// the cluster is known, a client left without connections asks a broker
/// of its last metadata, never the bootstrap addresses; with `rebootstrap`
/// (the default) it dials a bootstrap address.
#[test]
fn strategy_none_never_dials_a_bootstrap_address_again() {
    for rebootstrap in [true, false] {
        let mut sim = leader_1_through_boot(rebootstrap);
        let conn = *sim.sockets.keys().next().unwrap();
        sim.c
            .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
        sim.pump();
        assert!(sim.sockets.is_empty());
        // A connection that had answered, closed by its broker, asks
        // nothing by itself (an idle broker-side close opens nothing).
        let from = sim.log.len();
        sim.advance(Duration::from_secs(1));
        assert!(metadata_sent_to(&sim, from).is_empty());
        assert!(sim.sockets.is_empty());
        sim.c.request_metadata_refresh(sim.now);
        sim.pump();
        let sent = metadata_sent_to(&sim, from);
        assert_eq!(sent.len(), 1);
        if rebootstrap {
            assert_eq!(sent[0], "boot:9092");
            assert_eq!(connects_to(&sim, "boot:9092"), 2);
        } else {
            assert!(
                ["b1:9092", "b2:9092", "b3:9092"].contains(&sent[0].as_str()),
                "{sent:?}"
            );
            assert_eq!(connects_to(&sim, "boot:9092"), 1);
        }
    }
}

/// A known broker that cannot be reached (its connect refused) asks for the
/// metadata again after the retry backoff, and the metadata then goes to
/// a bootstrap address when no known broker is connected
/// (docs/connections.md, rules 13 and 14).
#[test]
fn a_known_broker_that_cannot_be_reached_asks_for_the_metadata_again() {
    let mut sim = leader_1_through_boot(true);
    let conn = *sim.sockets.keys().next().unwrap();
    sim.refused.insert("b1:9092".into());
    sim.c
        .handle_closed(sim.now, conn, ConnectionError::ClosedByBroker);
    sim.pump();
    let from = sim.log.len();
    // A request for broker 1 dials it again (after the reconnect backoff),
    // and is refused.
    sim.advance(Duration::from_millis(70));
    sim.request(Target::Broker(1));
    assert!(connects_to(&sim, "b1:9092") >= 2);
    assert!(metadata_sent_to(&sim, from).is_empty());
    // After the retry backoff (100 ms, jitter 0.2), Metadata goes out, to
    // the bootstrap address: nothing known is connected.
    sim.advance(Duration::from_millis(130));
    assert_eq!(metadata_sent_to(&sim, from), ["boot:9092"]);
}

/// A Metadata request queued behind a request that holds the connection
/// (`max.in.flight` 1) and not written by its deadline is dropped, and
/// the refresh is wanted again: a later one is sent (before, the refresh
/// counted it in flight for ever, and no Metadata went out again).
#[test]
fn a_metadata_request_that_expires_queued_is_asked_again() {
    let mut cfg = config(&["b2:9092"], None);
    cfg.max_in_flight = 1;
    let mut sim = Sim::new(cfg);
    sim.c.set_topics(["t".to_owned()]);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    let metadata = |sim: &Sim| sim.served(ApiKey::Metadata);
    assert_eq!(metadata(&sim), 1);
    // An application's Metadata request, never answered, holds the only
    // connection for 120 s.
    sim.held.insert(ApiKey::Metadata);
    let body = Box::new(crate::protocol::messages::metadata::MetadataRequest::default());
    let held =
        sim.c
            .request_with_timeout(sim.now, Target::AnyBroker, body, Duration::from_secs(120));
    sim.pump();
    sim.c.request_metadata_refresh(sim.now);
    sim.c.handle_timeout(sim.now);
    sim.pump();
    assert_eq!(metadata(&sim), 2, "the refresh waits behind the held one");
    // Past the queued refresh's deadline (30 s), then past the held
    // request's, whose timeout closes the connection.
    for _ in 0..30 {
        sim.advance(Duration::from_secs(5));
    }
    assert!(matches!(
        sim.responses.get(&held),
        Some(Err(
            RequestError::Timeout { .. } | RequestError::ConnectionLost { .. }
        ))
    ));
    assert!(
        metadata(&sim) >= 3,
        "the refresh is asked again once the queued one expired"
    );
}
