// A test backend's SidecarInfo: the hello fields given, and the head of its task (detect unless given: logits +
// pred_boxes of the given numQueries/numClasses; segment adds pred_masks), fp32 on the host's cores, unless the
// test says otherwise.
import type { SidecarInfo } from '../../src/sidecar/backend.ts';
import { taskFor } from '../../src/detect/tasks.ts';

type Given = Omit<SidecarInfo, 'task' | 'outputs' | 'precision' | 'precisions' | 'hostCores'> & Partial<SidecarInfo>;

export function testSidecarInfo(given: Given): SidecarInfo {
  return {
    task: 'detect', outputs: taskFor(given.task ?? 'detect').outputs(given), precision: 'fp32', precisions: ['fp32'], hostCores: true, ...given,
  };
}
