// postprocess() at 300 queries x 91 classes with few queries above the threshold, as a trained model's
// outputs are (bench, not a test): ms per call, five rounds of 2000 after a warm-up.
//   node --import tsx bench/server/postprocess-time.ts
import { postprocess } from '../../src/detect/postprocess.ts';
const Q=300,C=91;
const logits=new Float32Array(Q*C).map(()=>Math.random()*6-9), boxes=new Float32Array(Q*4).map(()=>Math.random());
for (let q=0;q<Q;q+=30) logits[q*C+5]=2;
const labels=Array.from({length:C},(_,i)=>'c'+i);
const run=()=>postprocess({logits,predBoxes:boxes,numQueries:Q,numClasses:C},{width:640,height:480,threshold:0.5,maxDetections:100,labels});
for(let i=0;i<3000;i++) run();
const xs=[]; for(let k=0;k<5;k++){ const t=performance.now(); for(let i=0;i<2000;i++) run(); xs.push((performance.now()-t)/2000); } console.log('hot ms', xs.map(x=>x.toFixed(4)).join(' '), run().length);
