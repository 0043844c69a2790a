/** The hosted form's style sheet, served from /assets (no inline style: the pages' CSP allows none). */
export const FORM_CSS = `
:root { --fw-accent: #2557d6; --fw-accent-dark: #1b42a6; --fw-text: #1c2333; --fw-muted: #5b6475; --fw-line: #cfd5e0; --fw-error: #b3261e; --fw-bg: #f3f5f9; }
.fw-body { margin: 0; background: var(--fw-bg); color: var(--fw-text); font: 16px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
.fw-card { max-width: 44rem; margin: 2.5rem auto 1rem; background: #fff; border-radius: 12px; box-shadow: 0 1px 2px #0000000f, 0 8px 24px #1c23330f; padding: 2.25rem 2.5rem; border-top: 6px solid var(--fw-accent); }
@media (max-width: 600px) { .fw-card { margin: 0; border-radius: 0; padding: 1.5rem 1.1rem; } }
.fw-title { font-size: 1.7rem; line-height: 1.25; margin: 0 0 .5rem; }
.fw-description { color: var(--fw-muted); margin-bottom: 1.5rem; }
.fw-footer { text-align: center; color: var(--fw-muted); font-size: .85rem; margin: 1rem auto 2rem; }
.fw-form { margin: 0; }
.fw-field { margin: 0 0 1.4rem; }
.fw-field[hidden], .fw-page[hidden], [hidden] { display: none !important; }
.fw-field > label, .fw-label, .fw-group > legend { display: block; font-weight: 600; margin: 0 0 .35rem; padding: 0; }
.fw-required { color: var(--fw-error); }
.fw-group { border: 0; margin: 0; padding: 0; min-width: 0; }
.fw-hint { color: var(--fw-muted); font-size: .92rem; margin: -.1rem 0 .45rem; }
.fw-error { color: var(--fw-error); font-size: .92rem; font-weight: 600; margin: .35rem 0 0; }
.fw-error:empty { display: none; }
.fw-form input[type=text], .fw-form input[type=email], .fw-form input[type=tel], .fw-form input[type=number],
.fw-form input[type=date], .fw-form input[type=time], .fw-form input[type=datetime-local], .fw-form select, .fw-form textarea {
  box-sizing: border-box; width: 100%; padding: .6rem .75rem; font: inherit; color: inherit; background: #fff;
  border: 1px solid var(--fw-line); border-radius: 8px; transition: border-color .15s, box-shadow .15s; }
.fw-form textarea { resize: vertical; }
.fw-form [aria-invalid=true], .fw-form [aria-invalid=true] input { border-color: var(--fw-error); }
.fw-form :focus-visible { outline: 3px solid #2557d666; outline-offset: 2px; border-color: var(--fw-accent); }
.fw-choices { display: grid; gap: .45rem; }
.fw-choices.fw-horizontal { grid-auto-flow: column; justify-content: start; gap: 1.25rem; }
.fw-choice { display: flex; align-items: center; gap: .55rem; }
.fw-choice input { width: 1.15rem; height: 1.15rem; margin: 0; accent-color: var(--fw-accent); }
.fw-choice label { font-weight: 400; margin: 0; }
.fw-choice label { display: inline-flex; align-items: center; gap: .5rem; }
.fw-option-image { width: 3rem; height: 3rem; object-fit: cover; border-radius: 6px; background: #eef2fd; flex: none; }
.fw-option-gallery { list-style: none; padding: 0; margin: .6rem 0 0; display: flex; flex-wrap: wrap; gap: .6rem 1rem; }
.fw-option-gallery li { display: flex; align-items: center; gap: .45rem; font-size: .95rem; color: var(--fw-muted); }
.fw-parts { display: flex; flex-wrap: wrap; gap: .75rem; align-items: flex-end; }
.fw-parts-creditcard .fw-part:first-child { flex: 2 1 14rem; }
.fw-part { flex: 1 1 12rem; }
.fw-part.fw-narrow { flex: 0 1 8rem; }
.fw-part label { display: block; font-size: .88rem; color: var(--fw-muted); margin-bottom: .2rem; }
.fw-matrix { overflow-x: auto; }
.fw-matrix table { border-collapse: collapse; width: 100%; }
.fw-matrix th, .fw-matrix td { padding: .45rem .6rem; text-align: center; border-bottom: 1px solid #e7eaf0; }
.fw-matrix th[scope=row] { text-align: left; font-weight: 500; }
.fw-matrix th[scope=col] { font-weight: 600; font-size: .9rem; }
.fw-matrix input { width: 1.1rem; height: 1.1rem; accent-color: var(--fw-accent); }
.fw-price { margin: 0 0 .4rem; color: var(--fw-muted); }
.fw-section { font-size: 1.25rem; margin: 1.75rem 0 .5rem; padding-bottom: .35rem; border-bottom: 1px solid #e7eaf0; }
.fw-page > .fw-field:first-child .fw-section { margin-top: .25rem; }
.fw-rich { color: var(--fw-text); }
.fw-file input[type=file] { font: inherit; }
.fw-files { list-style: none; padding: 0; margin: .4rem 0 0; }
.fw-files li { display: flex; align-items: center; gap: .6rem; padding: .35rem .6rem; background: #f3f6fc; border-radius: 6px; margin-bottom: .3rem; font-size: .95rem; }
.fw-files li button { margin-left: auto; }
.fw-signature canvas { display: block; width: 100%; max-width: 600px; height: 180px; border: 1px dashed #9aa4b6; border-radius: 8px; background: #fcfcfd; touch-action: none; cursor: crosshair; }
.fw-pad-tools { display: flex; flex-wrap: wrap; align-items: end; gap: .6rem; margin-top: .5rem; }
.fw-pad-tools label { flex-basis: 100%; font-size: .88rem; color: var(--fw-muted); }
.fw-pad-tools input { flex: 1 1 14rem; }
.fw-actions { display: flex; flex-wrap: wrap; gap: .75rem; margin-top: 1.75rem; align-items: center; }
.fw-button { font: inherit; font-weight: 600; padding: .65rem 1.4rem; border-radius: 8px; border: 1px solid var(--fw-accent); background: var(--fw-accent); color: #fff; cursor: pointer; }
.fw-button:hover { background: var(--fw-accent-dark); }
.fw-button[disabled] { opacity: .6; cursor: progress; }
.fw-button.fw-secondary { background: #fff; color: var(--fw-accent); }
.fw-button.fw-secondary:hover { background: #eef2fd; }
.fw-submit { margin-left: auto; }
.fw-alert { border: 1px solid #f1b7b3; background: #fdf0ef; color: #7a1a14; border-radius: 8px; padding: .75rem 1rem; margin-bottom: 1.25rem; }
.fw-alert p { margin: 0; font-weight: 600; }
.fw-alert ul { margin: .4rem 0 0; padding-left: 1.2rem; }
.fw-alert a { color: inherit; }
.fw-progress { margin-bottom: 1.5rem; }
.fw-progress-label { display: block; font-size: .9rem; color: var(--fw-muted); margin-bottom: .3rem; }
.fw-progress progress { width: 100%; height: .55rem; appearance: none; border: 0; border-radius: 99px; background: #e3e8f2; overflow: hidden; }
.fw-progress progress::-webkit-progress-bar { background: #e3e8f2; border-radius: 99px; }
.fw-progress progress::-webkit-progress-value { background: var(--fw-accent); border-radius: 99px; }
.fw-progress progress::-moz-progress-bar { background: var(--fw-accent); }
.fw-resume { margin-top: 1.25rem; padding: .9rem 1rem; background: #eef6ee; border: 1px solid #b9dbb9; border-radius: 8px; }
.fw-resume input { margin: .4rem 0; }
.fw-resume-email { margin-top: .75rem; }
.fw-resume-email label { display: block; font-weight: 600; }
.fw-resume-email-status:empty { display: none; }
.fw-hp { position: absolute; left: -10000px; width: 1px; height: 1px; overflow: hidden; }
.fw-visually-hidden { position: absolute !important; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.fw-labels-left .fw-field:not(.fw-type-section) { display: grid; grid-template-columns: 12rem 1fr; column-gap: 1rem; }
.fw-labels-left .fw-field > :not(label) { grid-column: 2; }
.fw-done { text-align: center; padding: 1.5rem 0; }
.fw-check { width: 3.5rem; height: 3.5rem; line-height: 3.5rem; margin: 0 auto 1rem; border-radius: 50%; background: #e3f3e6; color: #1d7a35; font-size: 1.9rem; font-weight: 700; }
.fw-closed { color: var(--fw-muted); }
`;
