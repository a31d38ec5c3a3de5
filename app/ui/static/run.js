// lero ui: follow one run over SSE. Writes text nodes only (never innerHTML), so event
// fields written by an LLM (candidate ids aside, nothing here is trusted) stay text.
"use strict";
(function () {
  const root = document.getElementById("run");
  if (!root) return;
  const runId = root.dataset.runId;
  const rendered = { status: root.dataset.status, working: root.dataset.working === "yes",
                     report: root.dataset.report === "yes" };
  const $ = (id) => document.getElementById(id);
  const llm = { requests: 0, tokens: 0 };

  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "—" : String(text);
    row.appendChild(td);
    return td;
  }

  function upsert(tableId, key, values, link) {
    const table = $(tableId);
    if (!table) return;
    const body = table.tBodies[0];
    let row = body.querySelector(`tr[data-key="${CSS.escape(key)}"]`);
    if (!row) {
      row = document.createElement("tr");
      row.dataset.key = key;
      body.appendChild(row);
    }
    row.replaceChildren();
    values.forEach((value, i) => {
      const td = cell(row, i === 0 && link ? "" : value);
      if (i === 0 && link) {
        const a = document.createElement("a");
        a.href = link;
        a.textContent = String(value);
        td.appendChild(a);
      }
    });
  }

  const fmt = (x) => (typeof x === "number" ? x.toFixed(3) : x);
  const seconds = (x) => (typeof x === "number" ? `${x.toFixed(1)} s` : x);
  // an event field as a person reads it: seconds (`*_s`) to a tenth, other fractions to 3 digits
  const field = (k, v) => (typeof v === "object" && v !== null ? JSON.stringify(v)
    : typeof v === "number" && !Number.isInteger(v) ? (k.endsWith("_s") ? v.toFixed(1) : v.toFixed(3)) : v);
  const candidateLink = (cid) => `/runs/${encodeURIComponent(runId)}/candidates/${encodeURIComponent(cid)}`;

  function onEvent(e) {
    const name = e.event;
    if (name === "generation_started" || name === "generation_finished") {  // generations done (app.reports.run_status)
      $("generation").textContent = String(e.generation + (name === "generation_finished" ? 1 : 0));
    } else if (name === "candidate") {
      upsert("live-candidates", e.candidate_id, [e.candidate_id, e.generation, e.stage, e.status, e.origin],
             candidateLink(e.candidate_id));
    } else if (name === "train_started" || name === "train_finished") {
      const running = name === "train_started";
      upsert("live-jobs", `${e.candidate_id}/${e.seed}`,
             [e.candidate_id, e.seed, running ? "training" : e.status + (e.cached ? " (cached)" : ""),
              running ? null : fmt(e.fitness), running ? null : seconds(e.elapsed_s)],
             candidateLink(e.candidate_id));
      const stage = document.querySelector(`#live-candidates tr[data-key="${CSS.escape(e.candidate_id)}"] td:nth-child(3)`);
      if (stage) stage.textContent = running ? "training" : "trained";
    } else if (name === "llm_call") {
      llm.requests += 1;
      llm.tokens += (e.prompt_tokens || 0) + (e.completion_tokens || 0);
      $("llm-requests").textContent = String(Math.max(llm.requests, Number($("llm-requests").textContent)));
      $("llm-tokens").textContent = String(Math.max(llm.tokens, Number($("llm-tokens").textContent)));
    }
    const log = $("log");
    if (log) {
      const { ts, event, ...rest } = e;
      const when = new Date(ts * 1000).toISOString().slice(11, 19);
      const fields = Object.entries(rest)
        .filter(([k]) => k !== "payload" && k !== "answer")
        .map(([k, v]) => `${k}=${field(k, v)}`).join(" ");
      log.appendChild(document.createTextNode(`${when} ${event} ${fields}\n`));
      while (log.childNodes.length > 300) log.removeChild(log.firstChild);
      log.scrollTop = log.scrollHeight;
    }
  }

  // The headline env steps: state.json's count (written as each generation ends) plus what
  // the jobs in flight have reported since, so it moves during training.
  const trained = new Map();
  let countedSteps = null;

  function showEnvSteps(s) {
    if (!$("env-steps")) return;
    const base = typeof s.env_steps === "number" ? s.env_steps : 0;
    if (base !== countedSteps) { countedSteps = base; trained.clear(); }
    for (const job of s.progress) trained.set(job.job_id, Math.max(trained.get(job.job_id) || 0, job.done || 0));
    let steps = base;
    for (const done of trained.values()) steps += done;
    $("env-steps").textContent = String(Math.max(steps, Number($("env-steps").textContent) || 0));
  }

  function onState(s) {
    showEnvSteps(s);
    const status = $("status");
    // app.reports.run_status: a run stopped at a question reads as waiting for an answer
    status.textContent = s.working && s.status === "interrupted" ? "resuming"
      : s.status === "interrupted" && $("pending") ? "waiting for your answer" : s.status;
    status.className = `status status-${status.textContent}`;
    if ($("wall") && typeof s.wall_s === "number") $("wall").textContent = s.wall_s.toFixed(1);
    const training = $("training");
    if (training) {
      training.replaceChildren();
      for (const job of s.progress) {
        const line = document.createElement("div");
        const bar = document.createElement("progress");
        bar.max = job.total || 1;
        bar.value = job.done || 0;
        line.append(`${job.candidate_id ?? "?"} `, bar,
                    ` ${job.done}/${job.total} steps` + (typeof job["return"] === "number" ? `, return ${job["return"].toFixed(2)}` : ""));
        training.appendChild(line);
      }
    }
    // A new state the page was not rendered for (a question, the end, a worker that
    // stopped): render the page again, which shows its forms and the report link.
    const settled = !["running", "starting"].includes(s.status);
    const started = rendered.status === "starting" && s.status !== "starting";
    const changed = settled && s.status !== rendered.status && (s.status !== "completed" || s.report);
    if (started || changed || (rendered.working && !s.working) || (s.report && !rendered.report)) {
      source.close();
      window.location.reload();
    }
  }

  const source = new EventSource(`/runs/${encodeURIComponent(runId)}/stream`);
  source.addEventListener("run", (m) => onEvent(JSON.parse(m.data)));
  source.addEventListener("state", (m) => onState(JSON.parse(m.data)));
})();
