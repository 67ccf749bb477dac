//! The live page: one HTML document with its styles and script inline (no
//! build step, no CDN: it works offline). It polls `/api/state` every
//! second and draws, with plain DOM and SVG: per-Domain progress, the
//! per-Call table (queues, replicas busy, utilisation, backlog), queue
//! depth and utilisation over time, the stage-window timeline (the paper's
//! Figure 7: one row per Call and replica, one bar per batch, each Call's
//! window behind its rows), the latest failures with cause and origin, and
//! the slowest live roots. Every figure it shows carries a `data-` attribute
//! naming it, so a test can read the page back.

pub(super) const HTML: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rayorch run</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fafafa}
h1{font-size:18px;margin:0 0 4px} h2{font-size:14px;margin:18px 0 6px}
table{border-collapse:collapse;background:#fff} td,th{padding:3px 8px;border-bottom:1px solid #e4e4e4;text-align:right}
th{background:#f0f0f0;font-weight:600} td:first-child,th:first-child{text-align:left}
.bar{display:inline-block;width:180px;height:10px;background:#e8e8e8;vertical-align:middle}
.bar i{display:block;height:10px;background:#3b7dd8}
.bar i.f{background:#d9534f;float:left}
#status{font-weight:600;padding:2px 8px;border-radius:3px;background:#ffe08a}
#status.finished{background:#b6e3b6}
svg{background:#fff;border:1px solid #ddd} .muted{color:#888}
.cause{max-width:520px;text-align:left;white-space:pre-wrap;word-break:break-word}
</style></head><body>
<h1>rayorch run <span id="status">connecting</span></h1>
<div class="muted">elapsed <span id="elapsed" data-wall-s="0">0</span> s ·
roots present <b data-root="present">0</b> · dropped <b data-root="dropped">0</b> ·
failed <b data-root="failed">0</b> · suppressed <b data-root="suppressed">0</b> ·
live <b data-root="live">0</b> · window <span id="window">–</span></div>
<h2>Domains</h2><table id="domains"><thead><tr><th>domain</th><th>published</th><th>done</th><th>failed</th><th>suppressed</th><th>progress</th></tr></thead><tbody></tbody></table>
<h2>Calls</h2><table id="calls"><thead><tr><th>call</th><th>ready</th><th>recovery</th><th>in flight</th><th>busy / replicas</th><th>batches</th><th>committed</th><th>fill</th><th>busy s</th><th>backlog s</th></tr></thead><tbody></tbody></table>
<h2>Queue depth over time</h2><svg id="queue-chart" width="900" height="160"></svg>
<h2>Utilisation over time (replicas busy ÷ replicas)</h2><svg id="util-chart" width="900" height="160"></svg>
<h2>Stage-window timeline</h2><svg id="timeline" width="900" height="60" data-batches="0"></svg>
<h2>Failures <span class="muted" id="failure-count"></span></h2><table id="failures"><thead><tr><th>root</th><th>outcome</th><th>kind</th><th>call</th><th>entity</th><th>cause</th></tr></thead><tbody></tbody></table>
<h2>Slowest live roots</h2><table id="slowest"><thead><tr><th>root</th><th>live for s</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
const COLORS=["#3b7dd8","#e08a1e","#41a85f","#9a58c9","#d9534f","#2aa3a3","#8c6d3f","#c2467d"];
const NS="http://www.w3.org/2000/svg";
function el(tag,attrs,text){const e=tag.startsWith("svg:")?document.createElementNS(NS,tag.slice(4)):document.createElement(tag);
 for(const k in attrs||{})e.setAttribute(k,attrs[k]); if(text!==undefined)e.textContent=text; return e;}
function cell(f,v){return el("td",{"data-f":f},String(v));}
function fmt(x,d){return x===null||x===undefined?"–":Number(x).toFixed(d);}
function clear(n){while(n.firstChild)n.removeChild(n.firstChild);}
function lines(svg,samples,series,names,yMax){
 clear(svg); const W=+svg.getAttribute("width"),H=+svg.getAttribute("height"),L=40,B=18;
 if(!samples.length)return; const t0=samples[0].t,t1=Math.max(samples[samples.length-1].t,t0+1e-9);
 const ym=yMax||Math.max(1,...samples.flatMap(s=>series(s)));
 svg.appendChild(el("svg:text",{x:2,y:12,"font-size":10},String(+ym.toFixed(2))));
 svg.appendChild(el("svg:text",{x:2,y:H-B,"font-size":10},"0"));
 svg.appendChild(el("svg:text",{x:W-60,y:H-4,"font-size":10},fmt(t1,1)+" s"));
 names.forEach((name,c)=>{const pts=samples.map(s=>{const x=L+(W-L-8)*(s.t-t0)/(t1-t0),y=(H-B)-(H-B-8)*Math.min(series(s)[c],ym)/ym;return x.toFixed(1)+","+y.toFixed(1);}).join(" ");
  svg.appendChild(el("svg:polyline",{points:pts,fill:"none",stroke:COLORS[c%COLORS.length],"stroke-width":1.5,"data-call":name}));
  svg.appendChild(el("svg:text",{x:L+4+c*110,y:H-4,"font-size":10,fill:COLORS[c%COLORS.length]},name));});
}
function timeline(svg,st){
 clear(svg); const calls=st.calls,batches=st.batches,sum=st.snapshot.summary||{calls:[]};
 const rows=[]; calls.forEach((_,c)=>{const reps=new Set(batches.filter(b=>b.call===c).map(b=>b.replica));const r=[...reps].sort((a,b)=>a-b);(r.length?r:[0]).forEach(x=>rows.push([c,x]));});
 const RH=12,L=110,W=+svg.getAttribute("width"),H=rows.length*RH+24; svg.setAttribute("height",H);
 const tEnd=Math.max(1e-9,sum.wall_s||0,...batches.map(b=>b.start_s+b.duration_s));
 const x=t=>L+(W-L-8)*t/tEnd; const rowOf=(c,r)=>rows.findIndex(q=>q[0]===c&&q[1]===r);
 calls.forEach((name,c)=>{const m=sum.calls[c]; const ys=rows.map((q,i)=>q[0]===c?i:-1).filter(i=>i>=0);
  if(m&&m.window_start_s!==null&&m.window_end_s!==null){svg.appendChild(el("svg:rect",{x:x(m.window_start_s),y:ys[0]*RH,width:Math.max(1,x(m.window_end_s)-x(m.window_start_s)),height:ys.length*RH,fill:COLORS[c%COLORS.length],"fill-opacity":0.12,"data-window":name}));}
  svg.appendChild(el("svg:text",{x:2,y:ys[0]*RH+10,"font-size":10},name));});
 for(const b of batches){const i=rowOf(b.call,b.replica); if(i<0)continue;
  svg.appendChild(el("svg:rect",{x:x(b.start_s),y:i*RH+1,width:Math.max(0.8,x(b.start_s+b.duration_s)-x(b.start_s)),height:RH-2,fill:COLORS[b.call%COLORS.length],stroke:b.failed?"#d00":"none","data-batch":b.call}));}
 svg.appendChild(el("svg:text",{x:W-60,y:H-4,"font-size":10},fmt(tEnd,1)+" s"));
 svg.setAttribute("data-batches",String(batches.length));
}
function render(st){
 const snap=st.snapshot||{},s=snap.summary; if(!s)return;
 const status=document.getElementById("status"); status.textContent=st.finished?"finished":"running"; status.className=st.finished?"finished":"";
 const e=document.getElementById("elapsed"); e.textContent=fmt(s.wall_s,1); e.setAttribute("data-wall-s",String(s.wall_s));
 for(const k of ["present","dropped","failed","suppressed"])document.querySelector('[data-root="'+k+'"]').textContent=String(s[k]);
 document.querySelector('[data-root="live"]').textContent=String(st.live_roots);
 const a=snap.admission; document.getElementById("window").textContent=a.roots+"/"+a.window+" roots, "+a.children+(a.window_children===null?"":"/"+a.window_children)+" children";
 const dt=document.querySelector("#domains tbody"); clear(dt);
 for(const d of s.domains){const tr=el("tr",{"data-domain":d.domain}); tr.appendChild(el("td",{},d.domain));
  for(const f of ["published","done","failed","suppressed"])tr.appendChild(cell(f,d[f]));
  const n=Math.max(1,d.published),bar=el("span",{class:"bar"}); bar.appendChild(el("i",{class:"f",style:"width:"+(100*(d.failed+d.suppressed)/n)+"%"}));
  bar.appendChild(el("i",{style:"width:"+(100*d.done/n)+"%"})); const td=el("td"); td.appendChild(bar); tr.appendChild(td); dt.appendChild(tr);}
 const ct=document.querySelector("#calls tbody"); clear(ct);
 s.calls.forEach((m,c)=>{const l=snap.calls[c]||{}; const tr=el("tr",{"data-call":m.name}); tr.appendChild(el("td",{style:"color:"+COLORS[c%COLORS.length]},m.name));
  tr.appendChild(cell("ready",l.ready)); tr.appendChild(cell("recovery",l.recovery)); tr.appendChild(cell("in_flight",l.in_flight_grains));
  tr.appendChild(cell("busy",l.in_flight_batches+" / "+l.replicas)); tr.appendChild(cell("batches",m.rpcs)); tr.appendChild(cell("committed",m.committed));
  tr.appendChild(cell("fill",fmt(100*m.fill,0)+"%")); tr.appendChild(cell("busy_s",fmt(m.busy_s,2))); tr.appendChild(cell("backlog_s",fmt(l.backlog_s,2))); ct.appendChild(tr);});
 lines(document.getElementById("queue-chart"),st.samples,x=>x.queued,st.calls);
 lines(document.getElementById("util-chart"),st.samples,x=>x.busy.map((b,i)=>x.replicas[i]?b/x.replicas[i]:0),st.calls,1);
 timeline(document.getElementById("timeline"),st);
 const ft=document.querySelector("#failures tbody"); clear(ft);
 document.getElementById("failure-count").textContent=s.failures.map(f=>f.domain+" "+f.level+" "+f.kind+": "+f.count).join(" · ");
 for(const f of [...st.failures].reverse()){const tr=el("tr",{"data-failure-key":String(f.key)});
  tr.appendChild(el("td",{},String(f.key))); tr.appendChild(el("td",{},f.outcome)); tr.appendChild(cell("kind",f.kind));
  tr.appendChild(el("td",{},f.call||"–")); tr.appendChild(el("td",{},f.entity||"–")); tr.appendChild(el("td",{class:"cause","data-f":"cause"},f.cause)); ft.appendChild(tr);}
 const sl=document.querySelector("#slowest tbody"); clear(sl);
 for(const r of st.slowest){const tr=el("tr",{"data-live-key":String(r.key)}); tr.appendChild(el("td",{},String(r.key))); tr.appendChild(el("td",{},fmt(s.wall_s-r.admitted_s,1))); sl.appendChild(tr);}
 document.body.setAttribute("data-rendered",st.finished?"finished":"running");
}
async function poll(){try{const r=await fetch("/api/state",{cache:"no-store"}); render(await r.json());}catch(e){document.getElementById("status").textContent="disconnected";}
 setTimeout(poll,1000);}
poll();
</script></body></html>
"##;
