"""Which runtime calls make the host wait for the device, and for what: the format facts the
latency graph needs, as data.

A synchronizing call blocks its CPU thread until device work it names has finished. The
trace records the call (a ``cuda_runtime`` / ``cuda_driver`` event, or its HIP twin) but not
always what it waited for, so each kind says which activities it awaits:

* ``device``: every stream's last activity launched before the call (``cudaDeviceSynchronize``);
* ``stream``: the last activity on the stream this thread launched to last (``cudaStreamSynchronize``,
  and so ``aten::item`` / ``_local_scalar_dense``, which copy device-to-host and then synchronize);
* ``event``: as ``stream``, for the work launched before this thread's last event record
  (``cudaEventSynchronize``);
* ``copy``: the call's own copy or memset activity, and with it everything before it on its
  stream (synchronous ``cudaMemcpy`` / ``cudaMemset``; ROCm's ``.item()`` uses
  ``hipMemcpyWithStream``).
"""

from __future__ import annotations

_DEVICE = ("cudaDeviceSynchronize", "cuCtxSynchronize", "hipDeviceSynchronize", "hipCtxSynchronize")
_STREAM = ("cudaStreamSynchronize", "cuStreamSynchronize", "hipStreamSynchronize")
_EVENT = ("cudaEventSynchronize", "cuEventSynchronize", "hipEventSynchronize")
_COPY = ("cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
         "cudaMemcpyPeer", "cudaMemset", "cudaMemset2D", "cudaMemset3D",
         "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD", "cuMemcpyDtoD", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2",
         "cuMemcpyDtoD_v2", "cuMemsetD8", "cuMemsetD32", "cuMemsetD8_v2", "cuMemsetD32_v2",
         "hipMemcpy", "hipMemcpyWithStream", "hipMemcpyDtoH", "hipMemcpyHtoD", "hipMemcpyDtoD", "hipMemset",
         "hipMemcpyToSymbol", "hipMemcpyFromSymbol")

#: runtime/driver call name -> what it waits for
SYNC_KINDS: dict[str, str] = {
    **{n: "device" for n in _DEVICE}, **{n: "stream" for n in _STREAM},
    **{n: "event" for n in _EVENT}, **{n: "copy" for n in _COPY},
}

#: calls that record an event on a stream (the point an ``event`` sync waits for)
EVENT_RECORDS = ("cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord", "cuEventRecordWithFlags",
                 "hipEventRecord", "hipEventRecordWithFlags")
