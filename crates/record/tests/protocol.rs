//! The wire protocol: every record round-trips; malformed and truncated
//! input is a typed error, never a panic (checked exhaustively on cuts of
//! a real frame and on random bytes).

use gpu_counters_record::protocol::*;
use proptest::prelude::*;

fn work(c: u32) -> Work {
    Work {
        correlation: c,
        device: 1,
        flags: activity::JOINED,
        context: 3,
        stream: 14,
        start_ns: 1_000,
        end_ns: 2_000,
        graph_id: 5,
        graph_node: 6,
        launch_tid: 77,
        enter_ns: 900,
        range_id: 8,
    }
}

/// One record of every tag.
fn every_record() -> Vec<Record<'static>> {
    vec![
        Record::Hello(Hello {
            ppid: 1,
            start_ns: 2,
            lib_version: 3,
            cupti_version: 4,
            driver_version: -5,
            flags: init::CUDA | init::NVTX,
            exe: Text::from_str("/usr/bin/python3"),
            cmdline: Text::new(b"python3\0train.py\0"),
        }),
        Record::Str(Str {
            id: 1,
            text: Text::from_str("_Z6kernelPf"),
        }),
        Record::Thread(Thread { tid: 9, name: 1 }),
        Record::Device(Device {
            ordinal: 0,
            uuid: *b"0123456789abcdef",
            sm_count: 132,
            cc_major: 9,
            cc_minor: 0,
            name: 2,
            chip: 3,
        }),
        Record::Clock(Clock {
            device: 0,
            cpu_ns: 10,
            offset_ns: -20,
            bound_ns: 30,
        }),
        Record::Init(Init {
            flags: init::CUDA,
            cupti_version: 24,
            driver_version: 13000,
        }),
        Record::Api(Api {
            tid: 9,
            domain: 1,
            kind: api_kind::LAUNCH,
            cbid: 307,
            correlation: 42,
            enter_ns: 100,
            exit_ns: 200,
            result: 0,
            range_id: 8,
            name: 4,
        }),
        Record::Kernel(Kernel {
            work: work(42),
            registers: 32,
            grid: [1, 2, 3],
            block: [4, 5, 6],
            smem_static: 7,
            smem_dynamic: 8,
            name: 1,
        }),
        Record::Copy(MemCopy {
            work: work(43),
            kind: copy_kind::HTOD,
            src_kind: memory_kind::PAGEABLE,
            dst_kind: memory_kind::DEVICE,
            bytes: 1 << 30,
        }),
        Record::Memset(Memset {
            work: work(44),
            memory_kind: 3,
            value: 0xff,
            bytes: 4096,
        }),
        Record::Sync(SyncEvent {
            correlation: 45,
            sync_type: 3,
            context: 3,
            stream: 14,
            cuda_event: 0,
            start_ns: 5,
            end_ns: 6,
        }),
        Record::NvtxPush(NvtxRange {
            tid: 9,
            ts_ns: 1,
            range_id: 8,
            domain: 0,
            name: Name::Text(Text::from_str("step 1")),
            color: 0xff00ff00,
            category: 2,
        }),
        Record::NvtxPop(NvtxPop {
            tid: 9,
            ts_ns: 2,
            domain: 0,
            range_id: 8,
        }),
        Record::NvtxStart(NvtxRange {
            tid: 9,
            ts_ns: 3,
            range_id: 9,
            domain: 1,
            name: Name::Id(5),
            color: 0,
            category: 0,
        }),
        Record::NvtxEnd(NvtxEnd {
            tid: 10,
            ts_ns: 4,
            range_id: 9,
        }),
        Record::NvtxMark(NvtxRange {
            tid: 9,
            ts_ns: 5,
            range_id: 0,
            domain: 0,
            name: Name::Text(Text::from_str("")),
            color: 0,
            category: 0,
        }),
        Record::NvtxDomain(NvtxDomain {
            id: 1,
            name: Text::from_str("NCCL"),
        }),
        Record::PmConfig(MetricConfig {
            device: 0,
            metrics: Seq::Slice(&[6, 7]),
        }),
        Record::PmSample(PmSample {
            device: 0,
            start_ns: 1,
            end_ns: 2,
            values: Seq::Slice(&[1.5, -2.25]),
        }),
        Record::CounterConfig(MetricConfig {
            device: 0,
            metrics: Seq::Slice(&[8]),
        }),
        Record::KernelCounters(KernelCounters {
            correlation: 42,
            device: 0,
            values: Seq::Slice(&[12345.0]),
        }),
        Record::Stats(Stats {
            records: 1,
            cupti_dropped: 2,
            buffers_refused: 3,
            incomplete: 4,
            queue_dropped: 5,
            unmatched_launches: 6,
            nvtx_unterminated: 7,
            nvtx_pop_empty: 8,
            pm_overflows: 9,
            pm_gaps: 10,
            own_kernels: 11,
        }),
        Record::Notice(Notice {
            ts_ns: 1,
            severity: severity::WARNING,
            text: Text::from_str("hardware counters are not permitted"),
        }),
        Record::Goodbye(Goodbye {
            reason: goodbye::ATEXIT,
            unsent: 3,
        }),
        Record::VkDevice(VkDevice {
            id: 1,
            uuid: [9; 16],
            name: 4,
            driver: 5,
            api_version: 4_206_822,
            period_ps: 1000,
            calibration: 1,
        }),
        Record::VkQueue(VkQueue {
            id: 0x1_0001,
            device: 1,
            family: 2,
            index: 3,
            flags: 7,
            valid_bits: 36,
        }),
        Record::VkScope(VkScope {
            queue: 0x1_0001,
            kind: scope_kind::RENDER_PASS,
            status: scope_status::TIMED,
            depth: 2,
            execution: 77,
            frame: 12,
            start_ns: 1_000,
            end_ns: 2_000,
            bound_ns: 30,
            name: Name::Id(6),
            stats: Seq::Slice(&[36, 12, 12, 73_424, 0, 0, 0]),
        }),
        Record::VkScope(VkScope {
            queue: 0x1_0001,
            kind: scope_kind::LABEL,
            status: scope_status::NOT_READY,
            depth: 1,
            execution: 78,
            frame: 12,
            start_ns: 0,
            end_ns: 0,
            bound_ns: 0,
            name: Name::Text(Text::from_str("shadow pass")),
            stats: Seq::Slice(&[]),
        }),
        Record::VkFrame(VkFrame {
            device: 1,
            frame: 12,
            cpu_start_ns: 900,
            cpu_end_ns: 2_500,
            gpu_start_ns: 1_000,
            gpu_end_ns: 2_000,
            bound_ns: 30,
            executions: 2,
            untimed: 1,
            flags: frame_flags::PRESENTED,
        }),
        Record::VkStatNames(VkStatNames {
            device: 1,
            names: Seq::Slice(&[10, 11, 12]),
        }),
        Record::VkStats(VkStats {
            values: Seq::Slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]),
        }),
        Record::Unknown {
            tag: 200,
            payload: &[1, 2, 3],
        },
    ]
}

fn frame_of(records: &[Record<'_>], seq: u32) -> Vec<u8> {
    let mut f = Vec::new();
    FrameHeader {
        flags: 0,
        pid: 1234,
        seq,
    }
    .encode(&mut f);
    for r in records {
        r.encode(&mut f).expect("fits");
    }
    f
}

#[test]
fn every_record_round_trips_in_one_frame() {
    let records = every_record();
    let frame = frame_of(&records, 7);
    let (header, decoded) = decode_frame(&frame).expect("valid");
    assert_eq!(
        header,
        FrameHeader {
            flags: 0,
            pid: 1234,
            seq: 7
        }
    );
    let decoded: Vec<Record<'_>> = decoded.map(|r| r.expect("valid record")).collect();
    assert_eq!(decoded, records);
    assert_eq!(validate_frame(&frame), Ok((header, records.len())));
}

#[test]
fn every_cut_of_a_frame_is_a_typed_error() {
    let frame = frame_of(&every_record(), 0);
    let whole = validate_frame(&frame).expect("valid").1;
    for cut in 0..frame.len() {
        let r = validate_frame(&frame[..cut]);
        if cut < HEADER_LEN {
            assert_eq!(r, Err(DecodeError::ShortFrame { len: cut }));
            continue;
        }
        // A cut at a record boundary is a valid, shorter frame; any other
        // cut is an error naming the record.
        match r {
            Ok((_, n)) => assert!(n < whole, "cut {cut}"),
            Err(DecodeError::RecordHeader { .. } | DecodeError::RecordLength { .. }) => {}
            Err(e) => panic!("cut {cut}: unexpected {e:?}"),
        }
    }
}

#[test]
fn a_payload_too_short_or_too_long_for_its_fields_is_an_error() {
    // A Goodbye needs 9 bytes; give 5, then 12.
    let mut short = frame_of(&[], 0);
    short.extend_from_slice(&[tag::GOODBYE, 0, 5, 0, 1, 0, 0, 0, 0]);
    assert_eq!(
        validate_frame(&short),
        Err(DecodeError::Truncated {
            offset: HEADER_LEN,
            tag: tag::GOODBYE,
            field: "unsent"
        })
    );
    let mut long = frame_of(&[], 0);
    long.extend_from_slice(&[tag::GOODBYE, 0, 12, 0]);
    long.extend_from_slice(&[0u8; 12]);
    assert_eq!(
        validate_frame(&long),
        Err(DecodeError::Trailing {
            offset: HEADER_LEN,
            tag: tag::GOODBYE,
            extra: 3
        })
    );
}

/// The Vulkan records: a scope's statistics and a frame's fields decode as
/// sent; counts name themselves in order, and a newer layer's extra counts
/// are named by position; a VkScope cut inside its statistics is an error
/// naming the field; an older collector sees the tags as unknown (they are
/// new tags of version 1).
#[test]
fn vulkan_records_decode_as_sent_and_name_their_counts() {
    let stats = VkStats {
        values: Seq::Slice(&[5, 6]),
    };
    let named: Vec<(String, u64)> = stats.named().map(|(k, v)| (k.into_owned(), v)).collect();
    assert_eq!(
        named,
        vec![
            ("vk_executions".to_string(), 5),
            ("vk_scopes".to_string(), 6)
        ]
    );
    let more: Vec<u64> = (0..VK_STAT_FIELDS.len() as u64 + 2).collect();
    let extra = VkStats {
        values: Seq::Slice(&more),
    };
    let last = extra.named().last().unwrap();
    assert_eq!(last.0, format!("vk_stat_{}", VK_STAT_FIELDS.len() + 1));
    for l in VK_STAT_LOSSES {
        assert!(VK_STAT_FIELDS.contains(&l), "{l}");
    }

    let scope = Record::VkScope(VkScope {
        queue: 1,
        kind: scope_kind::COMPUTE,
        status: scope_status::TIMED,
        depth: 1,
        execution: 2,
        frame: 3,
        start_ns: 4,
        end_ns: 5,
        bound_ns: 6,
        name: Name::Id(7),
        stats: Seq::Slice(&[1, 2, 3]),
    });
    let frame = frame_of(&[scope], 0);
    let (_, mut recs) = decode_frame(&frame).unwrap();
    match recs.next().unwrap().unwrap() {
        Record::VkScope(s) => {
            assert_eq!(s.stats.iter().collect::<Vec<u64>>(), vec![1, 2, 3]);
            assert_eq!(s.name, Name::Id(7));
        }
        other => panic!("{other:?}"),
    }
    // Cut inside the statistics, the lengths patched to match: the list
    // runs past its record.
    let mut cut = frame.clone();
    cut.truncate(frame.len() - 8);
    let len = (cut.len() - HEADER_LEN - RECORD_HEADER_LEN) as u16;
    cut[HEADER_LEN + 2..HEADER_LEN + 4].copy_from_slice(&len.to_le_bytes());
    assert_eq!(
        validate_frame(&cut),
        Err(DecodeError::Truncated {
            offset: HEADER_LEN,
            tag: tag::VK_SCOPE,
            field: "stats"
        })
    );
    assert_eq!(execution_correlation(5) & 0x8000_0000, 0x8000_0000);
    assert_eq!(execution_correlation(5) & 0x3FFF_FFFF, 5);
}

#[test]
fn bad_magic_version_and_sizes_are_refused() {
    let mut f = frame_of(&[], 0);
    f[0] ^= 0xff;
    assert!(matches!(validate_frame(&f), Err(DecodeError::Magic(_))));
    let mut f = frame_of(&[], 0);
    f[4] = 2;
    assert_eq!(validate_frame(&f), Err(DecodeError::Version(2)));
    let big = vec![0u8; MAX_FRAME + 1];
    assert_eq!(
        validate_frame(&big),
        Err(DecodeError::LongFrame { len: MAX_FRAME + 1 })
    );
}

#[test]
fn a_text_over_its_limit_is_refused_and_long_texts_are_cut_and_flagged() {
    // A Str whose text claims 5000 bytes.
    let mut f = frame_of(&[], 0);
    let mut payload = 1u32.to_le_bytes().to_vec();
    payload.extend_from_slice(&5000u16.to_le_bytes());
    payload.extend_from_slice(&vec![b'a'; 5000]);
    f.extend_from_slice(&[tag::STR, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    f.extend_from_slice(&payload);
    assert!(matches!(
        validate_frame(&f),
        Err(DecodeError::TextTooLong { len: 5000, .. })
    ));

    let long = "é".repeat(3000); // 6000 bytes
    let t = Text::from_str(&long);
    assert!(t.truncated);
    assert!(t.bytes.len() <= MAX_TEXT);
    assert!(
        std::str::from_utf8(t.bytes).is_ok(),
        "cut at a character boundary"
    );
    let f = frame_of(&[Record::Str(Str { id: 1, text: t })], 0);
    let (_, mut r) = decode_frame(&f).unwrap();
    match r.next().unwrap().unwrap() {
        Record::Str(s) => {
            assert!(s.text.truncated);
            assert_eq!(s.text.bytes, t.bytes);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_list_too_long_for_a_record_is_an_encode_error() {
    let values = vec![0.0f64; 10_000]; // 80 KB
    let r = Record::PmSample(PmSample {
        device: 0,
        start_ns: 0,
        end_ns: 0,
        values: Seq::Slice(&values),
    });
    let mut out = vec![9u8];
    assert!(matches!(
        r.encode(&mut out),
        Err(EncodeError::TooLong { .. })
    ));
    assert_eq!(out, vec![9u8], "nothing appended");
}

#[test]
fn the_sender_cuts_streams_into_frames_at_record_boundaries() {
    // Many records; record_spans finds each whole.
    let mut stream = Vec::new();
    for i in 0..5000u32 {
        Record::Thread(Thread { tid: i, name: i })
            .encode(&mut stream)
            .unwrap();
    }
    let spans: Vec<_> = record_spans(&stream).collect();
    assert_eq!(spans.len(), 5000);
    assert_eq!(spans.last().unwrap().end, stream.len());
    let decoded = Records::raw(&stream).filter(|r| r.is_ok()).count();
    assert_eq!(decoded, 5000);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Random bytes after a valid header never panic the decoder.
    #[test]
    fn random_records_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600)) {
        let mut f = frame_of(&[], 0);
        f.extend_from_slice(&body);
        let _ = validate_frame(&f);
        for r in decode_frame(&f).unwrap().1 {
            let _ = r;
        }
    }

    /// Random frames (header included) never panic the decoder.
    #[test]
    fn random_frames_never_panic(f in proptest::collection::vec(any::<u8>(), 0..100)) {
        let _ = validate_frame(&f);
    }

    /// Flipping any byte of a valid frame decodes or fails, never panics;
    /// a frame whose records decode re-encodes to the same bytes.
    #[test]
    fn corrupted_frames_fail_cleanly(pos in 0usize..2000, val in any::<u8>()) {
        let mut f = frame_of(&every_record(), 0);
        let pos = pos % f.len();
        f[pos] = val;
        if let Ok((h, records)) = decode_frame(&f) {
            let decoded: Result<Vec<_>, _> = records.collect();
            if let Ok(decoded) = decoded {
                let mut again = Vec::new();
                h.encode(&mut again);
                for r in &decoded {
                    r.encode(&mut again).unwrap();
                }
                // Texts flagged truncated keep their flag; everything else is byte-exact.
                prop_assert_eq!(again.len(), f.len());
            }
        }
    }

    /// Kernel records with any field values round-trip.
    #[test]
    fn kernels_round_trip(c in any::<u32>(), s in any::<u64>(), e in any::<u64>(), g in any::<[u32; 3]>(), regs in any::<u16>(), name in any::<u32>()) {
        let k = Record::Kernel(Kernel {
            work: Work { correlation: c, start_ns: s, end_ns: e, ..Work::default() },
            registers: regs,
            grid: g,
            block: g,
            smem_static: c,
            smem_dynamic: name,
            name,
        });
        let f = frame_of(&[k], 1);
        let (_, mut r) = decode_frame(&f).unwrap();
        prop_assert_eq!(r.next().unwrap().unwrap(), k);
        prop_assert!(r.next().is_none());
    }
}
