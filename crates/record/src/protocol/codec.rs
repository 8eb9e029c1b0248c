//! Encoding and decoding a record's payload: little-endian fields, texts,
//! names and lists, every length checked on the way in.

use super::*;

/// Appends little-endian fields to a record's payload.
pub(crate) struct Wr<'o>(pub(crate) &'o mut Vec<u8>);

impl Wr<'_> {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn text(&mut self, t: Text<'_>) -> &mut Self {
        let t = if t.bytes.len() > MAX_TEXT {
            Text {
                truncated: true,
                ..Text::new(t.bytes)
            }
        } else {
            t
        };
        let flag = if t.truncated { TEXT_TRUNCATED } else { 0 };
        self.u16(t.bytes.len() as u16 | flag);
        self.0.extend_from_slice(t.bytes);
        self
    }
    pub(crate) fn name(&mut self, n: Name<'_>) -> &mut Self {
        match n {
            Name::Id(id) if id != 0 => self.u32(id),
            Name::Id(_) => self.u32(0).text(Text::default()),
            Name::Text(t) => self.u32(0).text(t),
        }
    }
    pub(crate) fn seq<T: Le>(&mut self, s: &Seq<'_, T>) -> &mut Self {
        self.u16(s.len().min(u16::MAX as usize) as u16);
        for v in s.iter().take(u16::MAX as usize) {
            v.put(self.0);
        }
        self
    }
    pub(crate) fn work(&mut self, w: &Work) -> &mut Self {
        self.u32(w.correlation)
            .u8(w.device)
            .u8(w.flags)
            .u32(w.context)
            .u32(w.stream)
            .u64(w.start_ns)
            .u64(w.end_ns)
            .u32(w.graph_id)
            .u64(w.graph_node)
            .u32(w.launch_tid)
            .u64(w.enter_ns)
            .u64(w.range_id)
    }
    pub(crate) fn range(&mut self, r: &NvtxRange<'_>) -> &mut Self {
        self.u32(r.tid)
            .u64(r.ts_ns)
            .u64(r.range_id)
            .u32(r.domain)
            .u32(r.color)
            .u32(r.category)
            .name(r.name)
    }
}

impl Record<'_> {
    /// The record's tag.
    pub fn tag(&self) -> u8 {
        match self {
            Record::Hello(_) => tag::HELLO,
            Record::Str(_) => tag::STR,
            Record::Thread(_) => tag::THREAD,
            Record::Device(_) => tag::DEVICE,
            Record::Clock(_) => tag::CLOCK,
            Record::Init(_) => tag::INIT,
            Record::Api(_) => tag::API,
            Record::Kernel(_) => tag::KERNEL,
            Record::Copy(_) => tag::COPY,
            Record::Memset(_) => tag::MEMSET,
            Record::Sync(_) => tag::SYNC,
            Record::NvtxPush(_) => tag::NVTX_PUSH,
            Record::NvtxPop(_) => tag::NVTX_POP,
            Record::NvtxStart(_) => tag::NVTX_START,
            Record::NvtxEnd(_) => tag::NVTX_END,
            Record::NvtxMark(_) => tag::NVTX_MARK,
            Record::NvtxDomain(_) => tag::NVTX_DOMAIN,
            Record::PmConfig(_) => tag::PM_CONFIG,
            Record::PmSample(_) => tag::PM_SAMPLE,
            Record::CounterConfig(_) => tag::COUNTER_CONFIG,
            Record::KernelCounters(_) => tag::KERNEL_COUNTERS,
            Record::Stats(_) => tag::STATS,
            Record::Notice(_) => tag::NOTICE,
            Record::Goodbye(_) => tag::GOODBYE,
            Record::VkDevice(_) => tag::VK_DEVICE,
            Record::VkQueue(_) => tag::VK_QUEUE,
            Record::VkScope(_) => tag::VK_SCOPE,
            Record::VkFrame(_) => tag::VK_FRAME,
            Record::VkStatNames(_) => tag::VK_STAT_NAMES,
            Record::VkStats(_) => tag::VK_STATS,
            Record::Unknown { tag, .. } => *tag,
        }
    }

    /// Appends the record (header and payload) to `out`. On error `out` is
    /// left as it was.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let tag = self.tag();
        out.extend_from_slice(&[tag, 0, 0, 0]);
        let mut w = Wr(out);
        match self {
            Record::Hello(h) => {
                w.u32(h.ppid)
                    .u64(h.start_ns)
                    .u32(h.lib_version)
                    .u32(h.cupti_version)
                    .i32(h.driver_version)
                    .u32(h.flags)
                    .text(h.exe)
                    .text(h.cmdline);
            }
            Record::Str(s) => {
                w.u32(s.id).text(s.text);
            }
            Record::Thread(t) => {
                w.u32(t.tid).u32(t.name);
            }
            Record::Device(d) => {
                w.u32(d.ordinal);
                w.0.extend_from_slice(&d.uuid);
                w.u32(d.sm_count)
                    .u16(d.cc_major)
                    .u16(d.cc_minor)
                    .u32(d.name)
                    .u32(d.chip);
            }
            Record::Clock(c) => {
                w.u32(c.device)
                    .u64(c.cpu_ns)
                    .i64(c.offset_ns)
                    .u64(c.bound_ns);
            }
            Record::Init(i) => {
                w.u32(i.flags).u32(i.cupti_version).i32(i.driver_version);
            }
            Record::Api(a) => {
                w.u32(a.tid)
                    .u8(a.domain)
                    .u8(a.kind)
                    .u32(a.cbid)
                    .u32(a.correlation)
                    .u64(a.enter_ns)
                    .u64(a.exit_ns)
                    .u32(a.result)
                    .u64(a.range_id)
                    .u32(a.name);
            }
            Record::Kernel(k) => {
                w.work(&k.work).u16(k.registers);
                for v in k.grid.iter().chain(k.block.iter()) {
                    w.u32(*v);
                }
                w.u32(k.smem_static).u32(k.smem_dynamic).u32(k.name);
            }
            Record::Copy(c) => {
                w.work(&c.work)
                    .u8(c.kind)
                    .u8(c.src_kind)
                    .u8(c.dst_kind)
                    .u64(c.bytes);
            }
            Record::Memset(m) => {
                w.work(&m.work).u16(m.memory_kind).u32(m.value).u64(m.bytes);
            }
            Record::Sync(s) => {
                w.u32(s.correlation)
                    .u8(s.sync_type)
                    .u32(s.context)
                    .u32(s.stream)
                    .u32(s.cuda_event)
                    .u64(s.start_ns)
                    .u64(s.end_ns);
            }
            Record::NvtxPush(r) | Record::NvtxStart(r) | Record::NvtxMark(r) => {
                w.range(r);
            }
            Record::NvtxPop(p) => {
                w.u32(p.tid).u64(p.ts_ns).u32(p.domain).u64(p.range_id);
            }
            Record::NvtxEnd(e) => {
                w.u32(e.tid).u64(e.ts_ns).u64(e.range_id);
            }
            Record::NvtxDomain(d) => {
                w.u32(d.id).text(d.name);
            }
            Record::PmConfig(c) | Record::CounterConfig(c) => {
                w.u32(c.device).seq(&c.metrics);
            }
            Record::PmSample(s) => {
                w.u32(s.device).u64(s.start_ns).u64(s.end_ns).seq(&s.values);
            }
            Record::KernelCounters(k) => {
                w.u32(k.correlation).u32(k.device).seq(&k.values);
            }
            Record::Stats(s) => {
                for (_, v) in s.named() {
                    w.u64(v);
                }
            }
            Record::Notice(n) => {
                w.u64(n.ts_ns).u8(n.severity).text(n.text);
            }
            Record::Goodbye(g) => {
                w.u8(g.reason).u64(g.unsent);
            }
            Record::VkDevice(d) => {
                w.vk_device(d);
            }
            Record::VkQueue(q) => {
                w.vk_queue(q);
            }
            Record::VkScope(s) => {
                w.vk_scope(s);
            }
            Record::VkFrame(f) => {
                w.vk_frame(f);
            }
            Record::VkStatNames(n) => {
                w.u32(n.device).seq(&n.names);
            }
            Record::VkStats(s) => {
                w.seq(&s.values);
            }
            Record::Unknown { payload, .. } => {
                w.0.extend_from_slice(payload);
            }
        }
        let len = out.len() - start - RECORD_HEADER_LEN;
        let too_long = len > MAX_PAYLOAD
            || matches!(self, Record::PmConfig(MetricConfig { metrics: s, .. }) | Record::CounterConfig(MetricConfig { metrics: s, .. }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::PmSample(PmSample { values: s, .. }) | Record::KernelCounters(KernelCounters { values: s, .. }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::VkScope(VkScope { stats: s, .. }) | Record::VkStats(VkStats { values: s }) if s.len() > u16::MAX as usize)
            || matches!(self, Record::VkStatNames(VkStatNames { names: s, .. }) if s.len() > u16::MAX as usize);
        if too_long {
            out.truncate(start);
            return Err(EncodeError::TooLong { tag, len });
        }
        out[start + 2..start + 4].copy_from_slice(&(len as u16).to_le_bytes());
        Ok(())
    }
}

/// Reads little-endian fields of one record's payload.
pub(crate) struct Rd<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) tag: u8,
    pub(crate) offset: usize,
}

impl<'a> Rd<'a> {
    pub(crate) fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.b.len() - self.pos < n {
            return Err(DecodeError::Truncated {
                offset: self.offset,
                tag: self.tag,
                field,
            });
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(crate) fn arr<const N: usize>(
        &mut self,
        field: &'static str,
    ) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.arr::<1>(field)?[0])
    }
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.arr(field)?))
    }
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.arr(field)?))
    }
    pub(crate) fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.arr(field)?))
    }
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.arr(field)?))
    }
    pub(crate) fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.arr(field)?))
    }
    pub(crate) fn text(&mut self, field: &'static str) -> Result<Text<'a>, DecodeError> {
        let raw = self.u16(field)?;
        let len = (raw & !TEXT_TRUNCATED) as usize;
        if len > MAX_TEXT {
            return Err(DecodeError::TextTooLong {
                offset: self.offset,
                tag: self.tag,
                field,
                len,
            });
        }
        Ok(Text {
            bytes: self.take(len, field)?,
            truncated: raw & TEXT_TRUNCATED != 0,
        })
    }
    pub(crate) fn name(&mut self, field: &'static str) -> Result<Name<'a>, DecodeError> {
        match self.u32(field)? {
            0 => Ok(Name::Text(self.text(field)?)),
            id => Ok(Name::Id(id)),
        }
    }
    pub(crate) fn seq<T: Le>(&mut self, field: &'static str) -> Result<Seq<'a, T>, DecodeError> {
        let n = self.u16(field)? as usize;
        Ok(Seq::Raw(self.take(n * T::SIZE, field)?, PhantomData))
    }
    pub(crate) fn work(&mut self) -> Result<Work, DecodeError> {
        Ok(Work {
            correlation: self.u32("correlation")?,
            device: self.u8("device")?,
            flags: self.u8("flags")?,
            context: self.u32("context")?,
            stream: self.u32("stream")?,
            start_ns: self.u64("start_ns")?,
            end_ns: self.u64("end_ns")?,
            graph_id: self.u32("graph_id")?,
            graph_node: self.u64("graph_node")?,
            launch_tid: self.u32("launch_tid")?,
            enter_ns: self.u64("enter_ns")?,
            range_id: self.u64("range_id")?,
        })
    }
    pub(crate) fn range(&mut self) -> Result<NvtxRange<'a>, DecodeError> {
        Ok(NvtxRange {
            tid: self.u32("tid")?,
            ts_ns: self.u64("ts_ns")?,
            range_id: self.u64("range_id")?,
            domain: self.u32("domain")?,
            color: self.u32("color")?,
            category: self.u32("category")?,
            name: self.name("name")?,
        })
    }

    pub(crate) fn record(&mut self) -> Result<Record<'a>, DecodeError> {
        let r = match self.tag {
            tag::HELLO => Record::Hello(Hello {
                ppid: self.u32("ppid")?,
                start_ns: self.u64("start_ns")?,
                lib_version: self.u32("lib_version")?,
                cupti_version: self.u32("cupti_version")?,
                driver_version: self.i32("driver_version")?,
                flags: self.u32("flags")?,
                exe: self.text("exe")?,
                cmdline: self.text("cmdline")?,
            }),
            tag::STR => Record::Str(Str {
                id: self.u32("id")?,
                text: self.text("text")?,
            }),
            tag::THREAD => Record::Thread(Thread {
                tid: self.u32("tid")?,
                name: self.u32("name")?,
            }),
            tag::DEVICE => Record::Device(Device {
                ordinal: self.u32("ordinal")?,
                uuid: self.arr("uuid")?,
                sm_count: self.u32("sm_count")?,
                cc_major: self.u16("cc_major")?,
                cc_minor: self.u16("cc_minor")?,
                name: self.u32("name")?,
                chip: self.u32("chip")?,
            }),
            tag::CLOCK => Record::Clock(Clock {
                device: self.u32("device")?,
                cpu_ns: self.u64("cpu_ns")?,
                offset_ns: self.i64("offset_ns")?,
                bound_ns: self.u64("bound_ns")?,
            }),
            tag::INIT => Record::Init(Init {
                flags: self.u32("flags")?,
                cupti_version: self.u32("cupti_version")?,
                driver_version: self.i32("driver_version")?,
            }),
            tag::API => Record::Api(Api {
                tid: self.u32("tid")?,
                domain: self.u8("domain")?,
                kind: self.u8("kind")?,
                cbid: self.u32("cbid")?,
                correlation: self.u32("correlation")?,
                enter_ns: self.u64("enter_ns")?,
                exit_ns: self.u64("exit_ns")?,
                result: self.u32("result")?,
                range_id: self.u64("range_id")?,
                name: self.u32("name")?,
            }),
            tag::KERNEL => {
                let work = self.work()?;
                let registers = self.u16("registers")?;
                let mut dims = [0u32; 6];
                for d in &mut dims {
                    *d = self.u32("grid/block")?;
                }
                Record::Kernel(Kernel {
                    work,
                    registers,
                    grid: [dims[0], dims[1], dims[2]],
                    block: [dims[3], dims[4], dims[5]],
                    smem_static: self.u32("smem_static")?,
                    smem_dynamic: self.u32("smem_dynamic")?,
                    name: self.u32("name")?,
                })
            }
            tag::COPY => Record::Copy(MemCopy {
                work: self.work()?,
                kind: self.u8("kind")?,
                src_kind: self.u8("src_kind")?,
                dst_kind: self.u8("dst_kind")?,
                bytes: self.u64("bytes")?,
            }),
            tag::MEMSET => Record::Memset(Memset {
                work: self.work()?,
                memory_kind: self.u16("memory_kind")?,
                value: self.u32("value")?,
                bytes: self.u64("bytes")?,
            }),
            tag::SYNC => Record::Sync(SyncEvent {
                correlation: self.u32("correlation")?,
                sync_type: self.u8("sync_type")?,
                context: self.u32("context")?,
                stream: self.u32("stream")?,
                cuda_event: self.u32("cuda_event")?,
                start_ns: self.u64("start_ns")?,
                end_ns: self.u64("end_ns")?,
            }),
            tag::NVTX_PUSH => Record::NvtxPush(self.range()?),
            tag::NVTX_START => Record::NvtxStart(self.range()?),
            tag::NVTX_MARK => Record::NvtxMark(self.range()?),
            tag::NVTX_POP => Record::NvtxPop(NvtxPop {
                tid: self.u32("tid")?,
                ts_ns: self.u64("ts_ns")?,
                domain: self.u32("domain")?,
                range_id: self.u64("range_id")?,
            }),
            tag::NVTX_END => Record::NvtxEnd(NvtxEnd {
                tid: self.u32("tid")?,
                ts_ns: self.u64("ts_ns")?,
                range_id: self.u64("range_id")?,
            }),
            tag::NVTX_DOMAIN => Record::NvtxDomain(NvtxDomain {
                id: self.u32("id")?,
                name: self.text("name")?,
            }),
            tag::PM_CONFIG | tag::COUNTER_CONFIG => {
                let c = MetricConfig {
                    device: self.u32("device")?,
                    metrics: self.seq("metrics")?,
                };
                if self.tag == tag::PM_CONFIG {
                    Record::PmConfig(c)
                } else {
                    Record::CounterConfig(c)
                }
            }
            tag::PM_SAMPLE => Record::PmSample(PmSample {
                device: self.u32("device")?,
                start_ns: self.u64("start_ns")?,
                end_ns: self.u64("end_ns")?,
                values: self.seq("values")?,
            }),
            tag::KERNEL_COUNTERS => Record::KernelCounters(KernelCounters {
                correlation: self.u32("correlation")?,
                device: self.u32("device")?,
                values: self.seq("values")?,
            }),
            tag::STATS => {
                let mut a = [0u64; 11];
                for v in &mut a {
                    *v = self.u64("stats")?;
                }
                Record::Stats(Stats::from_array(a))
            }
            tag::NOTICE => Record::Notice(Notice {
                ts_ns: self.u64("ts_ns")?,
                severity: self.u8("severity")?,
                text: self.text("text")?,
            }),
            tag::GOODBYE => Record::Goodbye(Goodbye {
                reason: self.u8("reason")?,
                unsent: self.u64("unsent")?,
            }),
            tag::VK_DEVICE => Record::VkDevice(self.vk_device()?),
            tag::VK_QUEUE => Record::VkQueue(self.vk_queue()?),
            tag::VK_SCOPE => Record::VkScope(self.vk_scope()?),
            tag::VK_FRAME => Record::VkFrame(self.vk_frame()?),
            tag::VK_STAT_NAMES => Record::VkStatNames(VkStatNames {
                device: self.u32("device")?,
                names: self.seq("names")?,
            }),
            tag::VK_STATS => Record::VkStats(VkStats {
                values: self.seq("values")?,
            }),
            other => {
                let payload = &self.b[self.pos..];
                self.pos = self.b.len();
                Record::Unknown {
                    tag: other,
                    payload,
                }
            }
        };
        if self.pos != self.b.len() {
            return Err(DecodeError::Trailing {
                offset: self.offset,
                tag: self.tag,
                extra: self.b.len() - self.pos,
            });
        }
        Ok(r)
    }
}
