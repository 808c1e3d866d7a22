//! Round trips of the controller protocol's requests and responses, and its refusals.

use super::*;
use crate::controller::logic::ControllerError;
use crate::controller::records::DirectoryId;

#[test]
fn requests_and_responses_round_trip() {
    let requests = vec![
        Request::Register(BrokerRegistration {
            broker_id: 3,
            incarnation: Incarnation(5),
            host: "h".into(),
            port: 1,
            rack: None,
            unclean_shutdown: false,
            directory: Some(DirectoryId(9)),
        }),
        Request::Register(BrokerRegistration {
            broker_id: 4,
            incarnation: Incarnation(6),
            host: "h".into(),
            port: 2,
            rack: Some("r".into()),
            unclean_shutdown: true,
            directory: None,
        }),
        Request::Heartbeat {
            broker_id: 3,
            incarnation: Incarnation(5),
            shutdown: true,
            reports: LogReports { offline: vec![(TopicId([7; 16]), 2)], ..LogReports::default() },
            lapsed: true,
        },
        Request::Heartbeat {
            broker_id: 3,
            incarnation: Incarnation(5),
            shutdown: false,
            reports: LogReports {
                offline: Vec::new(),
                damaged: vec![(TopicId([8; 16]), 0), (TopicId([9; 16]), 4)],
                full: Vec::new(),
            },
            lapsed: false,
        },
        Request::Heartbeat {
            broker_id: 3,
            incarnation: Incarnation(5),
            shutdown: false,
            reports: LogReports {
                offline: vec![(TopicId([6; 16]), 1)],
                damaged: Vec::new(),
                full: vec![(TopicId([8; 16]), 0), (TopicId([9; 16]), 4)],
            },
            lapsed: false,
        },
        Request::CreateTopic {
            topic: NewTopic {
                name: "t".into(),
                partitions: 6,
                replication: 3,
                configs: vec![("a".into(), "b".into())],
                assignments: vec![],
            },
            validate_only: false,
        },
        Request::CreateTopic {
            topic: NewTopic {
                name: "u".into(),
                partitions: -1,
                replication: -1,
                configs: vec![],
                assignments: vec![vec![2, 3], vec![3, 1]],
            },
            validate_only: true,
        },
        Request::DeleteTopic { name: "t".into() },
        Request::CreatePartitions {
            name: "t".into(),
            count: 9,
            assignments: Vec::new(),
            validate_only: true,
        },
        Request::CreatePartitions {
            name: "t".into(),
            count: 3,
            assignments: vec![vec![2, 3], vec![3, 1]],
            validate_only: false,
        },
        Request::AlterConfigs {
            name: "t".into(),
            configs: [("x".to_owned(), "y".to_owned())].into(),
            validate_only: false,
        },
        Request::AlterConfigsIncremental {
            name: "t".into(),
            changes: vec![
                ConfigChange { name: "a".into(), op: ConfigOp::Set("1".into()) },
                ConfigChange { name: "b".into(), op: ConfigOp::Delete },
                ConfigChange { name: "c".into(), op: ConfigOp::Append("x,y".into()) },
                ConfigChange { name: "d".into(), op: ConfigOp::Subtract(String::new()) },
            ],
            validate_only: true,
        },
        Request::ProducerIds { broker_id: 2 },
        Request::ElectLeaders {
            election: Election::Preferred,
            partitions: vec![("t".into(), 0), ("u".into(), 3)],
        },
        Request::ElectLeaders { election: Election::Unclean, partitions: vec![] },
        Request::AlterReassignments {
            changes: vec![
                Reassignment { topic: "t".into(), partition: 1, target: Some(vec![4, 2]) },
                Reassignment { topic: "u".into(), partition: 0, target: None },
            ],
            allow_replication_factor_change: false,
        },
        Request::FetchMetadata { after: 77, max_wait_ms: 500 },
        Request::DescribeQuorum,
        Request::Within { ms: 1500, request: Box::new(Request::DeleteTopic { name: "t".into() }) },
    ];
    for request in requests {
        assert_eq!(Request::decode(&request.encode()).unwrap(), request);
    }
    let nested = Request::Within {
        ms: 1,
        request: Box::new(Request::Within {
            ms: 2,
            request: Box::new(Request::ProducerIds { broker_id: 1 }),
        }),
    };
    assert!(Request::decode(&nested.encode()).is_err(), "a Within inside a Within is refused");
    let responses = vec![
        Response::Done { offset: 4, fenced: true },
        Response::ProducerIds { first: 1000, count: 1000, offset: 9 },
        Response::Metadata(MetadataDelta {
            snapshot: Some(Bytes::from_static(b"snap")),
            entries: vec![(5, Bytes::from_static(b"e"))],
        }),
        Response::Quorum(QuorumStatus {
            leader: 2,
            term: 7,
            committed: 40,
            voters: vec![
                VoterStatus { id: 1, log_end: 38, last_heard_ms: 1_000, caught_up_ms: -1 },
                VoterStatus { id: 2, log_end: 41, last_heard_ms: 1_200, caught_up_ms: 1_200 },
            ],
        }),
        Response::Quorum(QuorumStatus::default()),
        Response::Error { error: ControllerError::NotController, leader: Some(2) },
        Response::Error {
            error: ControllerError::BadReplication { wanted: 3, live: 1 },
            leader: None,
        },
        Response::Error { error: ControllerError::BadConfig("why".into()), leader: None },
        Response::PartlyDone {
            offset: 12,
            refused: vec![
                ("t".into(), 1, ControllerError::BadAssignment("b".into())),
                ("u".into(), 0, ControllerError::NoReassignment("n".into())),
                ("v".into(), 2, ControllerError::ReplicationFactorChange { from: 3, to: 1 }),
            ],
        },
    ];
    for response in responses {
        assert_eq!(Response::decode(&response.encode()).unwrap(), response);
    }
    let hello = Hello { from: 2, channel: Channel::Raft };
    assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for len in 0..64usize {
        let junk: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
        let junk = Bytes::from(junk);
        assert!(Request::decode(&junk).is_err());
        assert!(Response::decode(&junk).is_err());
        assert!(Hello::decode(&junk).is_err());
    }
}

#[test]
fn an_unknown_config_operation_is_refused() {
    let request = Request::AlterConfigsIncremental {
        name: "t".into(),
        changes: vec![ConfigChange { name: "a".into(), op: ConfigOp::Delete }],
        validate_only: false,
    };
    let mut raw = request.encode().to_vec();
    // The operation code follows the type, the topic name, the count and the setting's name;
    // the last four bytes are the seal.
    let body_end = raw.len() - 4;
    let at = raw[..body_end].iter().rposition(|&b| b == OP_DELETE).unwrap();
    raw[at] = 9;
    let crc = crate::log::crc::crc32c(&raw[..body_end]);
    raw[body_end..].copy_from_slice(&crc.to_be_bytes());
    let error = Request::decode(&Bytes::from(raw)).unwrap_err().to_string();
    assert!(error.contains("config operation"), "{error}");
}

#[test]
fn a_topic_without_assignments_is_sent_as_earlier_releases_send_it() {
    let topic = |assignments: Vec<Vec<i32>>| NewTopic {
        name: "t".into(),
        partitions: -1,
        replication: -1,
        configs: vec![],
        assignments,
    };
    // Nodes of earlier releases know type 3, without assignments, and nothing after it.
    let plain = Request::CreateTopic { topic: topic(vec![]), validate_only: false }.encode();
    assert_eq!(plain[0], CREATE_TOPIC);
    let assigned = Request::CreateTopic { topic: topic(vec![vec![1, 2]]), validate_only: false };
    assert_eq!(assigned.encode()[0], CREATE_TOPIC_ASSIGNED);
    assert_eq!(Request::decode(&assigned.encode()).unwrap(), assigned);
}
