// lambdajobs dashboard: live updates and confirmations. No dependency.
(function () {
  "use strict";
  // Forms with data-confirm ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (e) {
      if (!window.confirm(f.getAttribute("data-confirm"))) { e.preventDefault(); }
    });
  });
  // The job list refreshes its rows every 2 seconds.
  var table = document.querySelector("table[data-refresh]");
  if (table) {
    var body = table.querySelector("tbody");
    setInterval(function () {
      fetch(table.getAttribute("data-refresh"), { headers: { "Accept": "text/html" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null && html.trim() !== body.innerHTML.trim()) { body.innerHTML = html; } })
        .catch(function () {});
    }, 2000);
  }
  // A job's page follows the job until it ends: each request waits for
  // the job's next change from the version last seen (its ETag); one
  // answered at once without a change (an operator's read, a refused
  // wait) is asked again a second later.
  var job = document.getElementById("job");
  if (job && !job.getAttribute("data-final")) {
    var final = { succeeded: 1, failed: 1, cancelled: 1 };
    var fmt = function (t) { return t ? t.replace("T", " ").replace("Z", "") : "-"; };
    var etag = "";
    var follow = function () {
      var asked = Date.now();
      var again = function (changed) { setTimeout(follow, changed || Date.now() - asked > 1000 ? 0 : 1000); };
      fetch(job.getAttribute("data-live"), { headers: etag ? { "If-None-Match": etag } : {} })
        .then(function (r) {
          if (!r.ok) { return null; }
          var seen = etag;
          etag = r.headers.get("ETag") || "";
          return r.json().then(function (v) { return { v: v, changed: etag !== "" && etag !== seen }; });
        })
        .then(function (a) {
          if (!a) { again(false); return; }
          var v = a.v;
          var st = document.getElementById("status");
          st.textContent = v.status; st.className = "status s-" + v.status;
          document.getElementById("attempt").textContent = v.attempt;
          document.getElementById("error").textContent = v.error || "-";
          document.getElementById("started").textContent = fmt(v.started_at);
          document.getElementById("finished").textContent = fmt(v.finished_at);
          var res = v.result === null || v.result === undefined ? "" : JSON.stringify(v.result, null, 2);
          if (v.result_bytes) { res = v.result_bytes + " bytes, kept as an S3 object: reload the page for its link."; }
          var out = document.getElementById("result");
          if (out) { out.textContent = res; }
          var p = document.getElementById("progress");
          if (v.result && typeof v.result.done === "number" && v.result.total) {
            p.hidden = false; p.value = Math.round(100 * v.result.done / v.result.total);
          } else if (v.result && typeof v.result.percent === "number") {
            p.hidden = false; p.value = v.result.percent;
          }
          var done = !!final[v.status];
          document.getElementById("cancel").disabled = done;
          document.getElementById("retry").disabled = !(v.status === "failed" || v.status === "cancelled");
          if (!done) { again(a.changed); }
        })
        .catch(function () { again(false); });
    };
    follow();
  }
})();
