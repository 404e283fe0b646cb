// Draws a clustersim report's charts with Apache ECharts (inlined beside this script). The page's
// data is the JSON in <script id="report-data">; each chart spec names the <div> it fills. Three
// kinds: "bars" (stacked, with an optional limit line such as HBM capacity), "lines" (one or two y
// axes over a numeric x axis: scaling curves, CDFs, throughput against rate) and "scatter" (plans by
// time and cost, the Pareto front as a line). SVG rendering, so the page prints and zooms cleanly.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  // Tooltips ask for values that may be missing (null in the data): those show as "-".
  const number = (v) => {
    if (typeof v !== "number" || !Number.isFinite(v)) return "-";
    return (Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(2) : +v.toPrecision(4)).toString();
  };

  function bars(spec) {
    const horizontal = spec.horizontal !== false;
    const category = { type: "category", data: spec.categories, axisLabel: { width: 260, overflow: "truncate" } };
    const value = { type: "value", name: spec.unit, nameLocation: "middle", nameGap: 28 };
    const series = spec.series.map((s, i) => ({ name: s.name, type: "bar", stack: "total", barMaxWidth: 36, data: s.values, itemStyle: { color: palette[i % palette.length] } }));
    if (spec.limit && series.length) {
      // The limit (HBM capacity) as a dashed line on the first series, inside the axis.
      value.max = (extent) => Math.ceil(Math.max(extent.max, spec.limit.value) * 1.08);
      series[0].markLine = {
        symbol: "none", silent: true, lineStyle: { color: "#c00", type: "dashed", width: 2 },
        // Beside the line's far end, clear of the axis's last tick label.
        label: { formatter: spec.limit.label + " " + number(spec.limit.value) + " " + (spec.unit || ""), position: horizontal ? "insideEndTop" : "end", color: "#c00" },
        data: [horizontal ? { xAxis: spec.limit.value } : { yAxis: spec.limit.value }],
      };
    }
    return {
      tooltip: { trigger: "axis", axisPointer: { type: "shadow" }, valueFormatter: number },
      legend: { top: 0, type: "scroll" },
      grid: { left: horizontal ? 280 : 60, right: 40, top: 40, bottom: 50 },
      xAxis: horizontal ? value : category,
      yAxis: horizontal ? Object.assign(category, { inverse: true }) : value,
      series: series,
    };
  }

  function lines(spec) {
    const axes = spec.y_names.map((name, i) => ({ type: spec.y_log ? "log" : "value", name: name, position: i === 0 ? "left" : "right", min: spec.y_min, max: spec.y_max }));
    const x = { type: spec.x_log ? "log" : "value", name: spec.x_name, nameLocation: "middle", nameGap: 28, scale: true };
    if (spec.x_log) {
      // A log axis over the data's own decades (or doublings), not from 1.
      const base = spec.x_log_base || 10;
      const xs = spec.series.flatMap((s) => s.points.map((p) => p[0])).filter((v) => v > 0);
      x.logBase = base;
      x.min = Math.pow(base, Math.floor(Math.log(Math.min(...xs)) / Math.log(base)));
      x.max = Math.pow(base, Math.ceil(Math.log(Math.max(...xs)) / Math.log(base)));
    }
    return {
      tooltip: { trigger: "axis", valueFormatter: number },
      legend: { top: 0, type: "scroll" },
      grid: { left: 70, right: axes.length > 1 ? 70 : 30, top: 56, bottom: 50 },
      xAxis: x,
      yAxis: axes,
      series: spec.series.map((s, i) => ({
        name: s.name, type: "line", yAxisIndex: s.axis || 0, data: s.points, showSymbol: s.points.length <= 30, step: s.step ? "end" : false,
        itemStyle: { color: palette[i % palette.length] },
      })),
    };
  }

  function scatter(spec) {
    return {
      tooltip: {
        trigger: "item",
        // Labels come from the results (topology names among them): shown as text, never as markup.
        formatter: (p) => (p.value[2] ? echarts.format.encodeHTML(p.value[2]) + "<br>" : "") + echarts.format.encodeHTML(spec.x_name + " " + number(p.value[0]) + ", " + spec.y_name + " " + number(p.value[1])),
      },
      legend: { top: 0, type: "scroll" },
      grid: { left: 80, right: 30, top: 56, bottom: 50 },
      xAxis: { type: "value", name: spec.x_name, nameLocation: "middle", nameGap: 28, scale: true },
      yAxis: { type: "value", name: spec.y_name, scale: true },
      series: spec.series.map((s, i) => ({
        name: s.name, type: s.line ? "line" : "scatter", data: s.points, symbolSize: s.line ? 8 : 6, itemStyle: { color: palette[i % palette.length] },
      })),
    };
  }

  const kinds = { bars: bars, lines: lines, scatter: scatter };
  let drawn = 0;
  for (const spec of data.charts) {
    const element = document.getElementById(spec.id);
    if (!element) throw new Error("no element for chart " + spec.id);
    const chart = echarts.init(element, null, { renderer: "svg" });
    const option = kinds[spec.type](spec);
    option.animation = false;
    chart.setOption(option);
    window.addEventListener("resize", () => chart.resize());
    drawn += 1;
  }
  document.body.dataset.chartsDrawn = String(drawn);
})();
