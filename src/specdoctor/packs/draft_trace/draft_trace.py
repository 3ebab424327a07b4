"""Handler of the draft-trace pack: one row per request per step, read before the scheduler
updates (a finished request is freed by the update).

``{"req", "draft", "out"}`` plus ``"prompt"`` (token ids) the first time a request appears;
rows with neither drafts nor output are skipped.
"""

_seen = set()


def rows(call):  # runs inside the engine: standard library only
    scheduler, scheduler_output, model_runner_output = call.args[:3]
    spec = scheduler_output.scheduled_spec_decode_tokens or {}
    sampled = model_runner_output.sampled_token_ids or []
    index = model_runner_output.req_id_to_index or {}
    out_rows = []
    for req_id in scheduler_output.num_scheduled_tokens:
        req = scheduler.requests.get(req_id)
        i = index.get(req_id)
        out = sampled[i] if i is not None and i < len(sampled) else []
        row = {"req": req_id, "draft": [int(t) for t in spec.get(req_id) or []],
               "out": [int(t) for t in out]}
        if req_id not in _seen and req is not None:
            _seen.add(req_id)
            row["prompt"] = [int(t) for t in req.prompt_token_ids or []]
        if row["out"] or row["draft"]:
            out_rows.append(row)
    return out_rows
